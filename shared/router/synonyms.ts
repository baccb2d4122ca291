// A small English lexicon of words people use for the same need ("novels" for books, "hot" for
// temperature, "tomorrow" for a forecast). Lexical retrieval cannot see these; they are added to
// the prompt's words for retrieval and rerank (never for filling). Everyday English only — no
// API or operation names — so it helps any catalog that speaks of these things.
/** Words that mean the same thing; a hint is only associated (tomorrow → forecast) and weighs less. */
const GROUPS: Record<string, string[]> = {
  book: ['novel', 'novels', 'paperback', 'paperbacks', 'hardback', 'ebook', 'ebooks', 'bookstore'],
  temperature: ['hot', 'cold', 'warm', 'chilly', 'freezing', 'degrees', 'celsius', 'fahrenheit', 'temp'],
  weather: ['sunny', 'cloudy', 'snowy', 'snow', 'foggy', 'stormy', 'umbrella', 'raining', 'rainy'],
  forecast: ['upcoming', 'outlook', 'prediction'],
  history: ['historical', 'historic', 'archive', 'past'],
  now: ['moment', 'currently', 'presently'],
  pollution: ['polluted', 'smog', 'pm10', 'pm25', 'ozone', 'breathe', 'smoggy'],
  job: ['vacancy', 'vacancies', 'opening', 'openings', 'role', 'roles', 'position', 'positions', 'career', 'employment', 'hiring', 'work', 'gig'],
  product: ['catalogue', 'catalog', 'goods', 'merchandise', 'sell', 'sale'],
  order: ['purchases', 'bought', 'deliveries', 'delivered', 'shipped', 'parcel', 'package', 'track'],
  appointment: ['slot', 'slots', 'availability', 'available', 'visit', 'consultation', 'see'],
  doctor: ['gp', 'physician', 'physiotherapist', 'dermatologist', 'cardiologist'],
  latest: ['newest', 'recent', 'new', 'today', 'todays', 'breaking', 'current'],
  headlines: ['stories', 'story', 'articles', 'news'],
  article: ['story', 'piece', 'read'],
};

const HINTS: Record<string, string[]> = {
  forecast: ['tomorrow', 'tonight', 'weekend', 'coming', 'will', 'going', 'later', 'next'],
  history: ['yesterday', 'ago', 'was', 'were', 'did'],
};

export interface Synonym {
  word: string;
  /** Share of the word's weight it carries: 0.8 for a synonym, 0.4 for a hint. */
  strength: number;
}

const EXPAND = new Map<string, Synonym[]>();
for (const [groups, strength] of [[GROUPS, 0.8], [HINTS, 0.4]] as const) {
  for (const [head, list] of Object.entries(groups)) {
    for (const w of list) EXPAND.set(w, [...(EXPAND.get(w) ?? []), { word: head, strength }]);
  }
}

/** The words a prompt word also stands for (none for most words). */
export function synonymsOf(word: string): Synonym[] {
  return EXPAND.get(word) ?? [];
}
