// One stream's frames, written as fast as its client takes them and no faster. `write()` returning
// false means the socket already holds more than its high-water mark: from then until 'drain' the
// stream hands the socket nothing more, and holds instead
//   - at most one progress event: a newer one supersedes it (only the latest stage is worth
//     reading late; the terminal event carries the outcome), counted as coalesced;
//   - no keep-alive comment (bytes are waiting already: the connection is not idle);
//   - the terminal event, handed on in slices of SLICE_BYTES, one per 'drain', so Node's socket
//     buffer never holds more than about a slice of it.
// Ids are given as frames are written, so a client sees 1, 2, 3… whatever was coalesced.
// What the stream holds stays above maxBufferedBytes with no 'drain' for drainTimeoutMs: the client
// is not reading, and the stream is closed (the run is not affected; its outcome stays at
// GET /v1/query/requests/{request_id}, with the result for a keyed request).
import type { ServerResponse } from 'node:http';

/** Node's default high-water mark of a socket: each slice fills it, and the next waits for 'drain'. */
const SLICE_BYTES = 16 * 1024;

export interface SseWriterOptions {
  maxBufferedBytes: number;
  drainTimeoutMs: number;
  /** A progress event not yet written was replaced by a newer one. */
  onCoalesced?: () => void;
  /** The stream was closed for holding too much for too long. */
  onCut?: () => void;
}

export type Delivery = 'delivered' | 'closed';

export class SseWriter {
  private seq = 0;
  /** JSON of the latest progress event not yet written (a newer one replaces it). */
  private progress: string | undefined;
  /** Framed bytes that must all be written, in order (the terminal event, and the progress event
   *  that was pending when it came): not yet handed to the socket. */
  private tail: Buffer | undefined;
  private ending = false;
  /** The last byte of the terminal event was handed to the response. */
  private ended = false;
  private backedUp = false;
  private finished = false;
  private watchdog: NodeJS.Timeout | undefined;
  private settle!: (d: Delivery) => void;
  /** 'delivered' once every byte, terminal included, has left for the client; 'closed' otherwise. */
  readonly done = new Promise<Delivery>((resolve) => (this.settle = resolve));

  constructor(
    private readonly res: ServerResponse,
    private readonly opts: SseWriterOptions,
  ) {
    res.on('drain', this.onDrain);
    res.once('finish', () => this.finish(this.ended ? 'delivered' : 'closed'));
    res.once('close', () => this.finish(this.ended && res.writableFinished ? 'delivered' : 'closed'));
    // A caller who left while its query was submitted closed the connection before these listeners.
    if (res.destroyed || res.socket?.destroyed !== false) this.finish('closed');
  }

  /** Bytes this stream holds in the API: events not yet handed on, and what the socket still buffers. */
  get buffered(): number {
    if (this.finished) return 0;
    return (this.progress?.length ?? 0) + (this.tail?.length ?? 0) + this.res.writableLength;
  }

  get open(): boolean {
    return !this.finished && !this.res.destroyed;
  }

  sendProgress(data: unknown) {
    if (!this.open || this.ending) return;
    if (this.progress !== undefined) this.opts.onCoalesced?.();
    this.progress = JSON.stringify(data);
    this.flush();
  }

  /** `: keep-alive`, only on a connection with nothing waiting (it keeps idle proxies from closing it). */
  keepAlive() {
    if (!this.open || this.ending || this.backedUp || this.res.writableLength > 0) return;
    this.write(': keep-alive\n\n');
  }

  /** The one terminal event, then the end of the response. */
  sendTerminal(event: 'result' | 'error', data: unknown): Promise<Delivery> {
    if (this.open && !this.ending) {
      this.ending = true;
      // Ids are taken now, in order: the pending progress event (if any), then this one.
      const frames = this.progress === undefined ? [] : [this.frame('progress', this.progress)];
      this.progress = undefined;
      frames.push(this.frame(event, JSON.stringify(data)));
      this.tail = Buffer.from(frames.join(''));
      this.flush();
    }
    return this.done;
  }

  /** Ends the response now: what was not handed on is dropped. */
  close() {
    if (this.finished) return;
    if (this.res.headersSent && !this.res.writableEnded) this.res.end();
    else this.res.destroy();
  }

  private frame(event: string, json: string) {
    this.seq += 1;
    return `id: ${this.seq}\nevent: ${event}\ndata: ${json}\n\n`;
  }

  private write(chunk: string | Buffer): boolean {
    if (this.res.write(chunk)) return true;
    this.backedUp = true;
    this.watch();
    return false;
  }

  private flush() {
    if (!this.open || this.backedUp) {
      this.watch();
      return;
    }
    if (this.progress !== undefined) {
      const json = this.progress;
      this.progress = undefined;
      if (!this.write(this.frame('progress', json))) return;
    }
    while (this.tail) {
      const slice = this.tail.subarray(0, SLICE_BYTES);
      this.tail = this.tail.length > SLICE_BYTES ? this.tail.subarray(SLICE_BYTES) : undefined;
      if (!this.tail) {
        this.ended = true;
        this.res.end(slice);
        return;
      }
      if (!this.write(slice)) return;
    }
  }

  private readonly onDrain = () => {
    this.backedUp = false;
    this.unwatch();
    this.flush();
  };

  /** Backed up and over the bound: closed unless a 'drain' comes in time. */
  private watch() {
    if (this.watchdog || !this.backedUp || this.finished || this.buffered <= this.opts.maxBufferedBytes) return;
    this.watchdog = setTimeout(() => {
      this.watchdog = undefined;
      if (!this.backedUp || this.finished || this.buffered <= this.opts.maxBufferedBytes) return;
      this.opts.onCut?.();
      this.res.destroy();
    }, this.opts.drainTimeoutMs);
    this.watchdog.unref();
  }

  private unwatch() {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = undefined;
  }

  private finish(d: Delivery) {
    if (this.finished) return;
    this.finished = true;
    this.unwatch();
    this.res.off('drain', this.onDrain);
    this.progress = this.tail = undefined;
    this.settle(d);
  }
}
