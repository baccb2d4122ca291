// Dot products of one 384-float vector with chosen rows of a matrix, in WebAssembly with 128-bit
// SIMD (f32x4): the dense scan's inner loop, ~4× fewer instructions than scalar JavaScript, which
// has no SIMD. The module is 205 bytes, assembled below from named instructions (its text form is
// in the comment) because no WebAssembly toolchain is among the project's packages. Node ≥ 16
// validates and runs it; `createDotKernel()` returns null where it cannot (the caller falls back
// to JavaScript).
//
// (func (export "dots") (param $q i32) (param $m i32) (param $idx i32) (param $count i32) (param $out i32)
//   (local $i i32) (local $d i32) (local $row i32) (local $acc v128)
//   for i in 0..count: row = m + idx[i] * 1536; acc = 0
//     for d in 0..1536 step 16: acc += v128.load(q + d) * v128.load(row + d)
//     out[i] = acc[0] + acc[1] + acc[2] + acc[3])
// plus one exported memory ("mem").

const DIM_BYTES = 384 * 4;

const OP = {
  block: [0x02, 0x40], loop: [0x03, 0x40], end: [0x0b], brIf: (l: number) => [0x0d, l],
  get: (i: number) => [0x20, i], set: (i: number) => [0x21, i], tee: (i: number) => [0x22, i],
  i32Load: [0x28, 0x02, 0x00], f32Store: [0x38, 0x02, 0x00],
  i32Const: (n: number) => [0x41, ...sleb(n)], i32Eqz: [0x45], i32LtU: [0x49], i32Add: [0x6a], i32Mul: [0x6c], i32Shl: [0x74], f32Add: [0x92],
  v128Load: [0xfd, 0x00, 0x02, 0x00], v128Zero: [0xfd, 0x0c, ...new Array<number>(16).fill(0)],
  lane: (l: number) => [0xfd, 0x1f, l], f32x4Add: [0xfd, 0xe4, 0x01], f32x4Mul: [0xfd, 0xe6, 0x01],
};

function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && !(b & 0x40)) || (n === -1 && b & 0x40)) return [...out, b];
    out.push(b | 0x80);
  }
}
const uleb = (n: number): number[] => (n < 0x80 ? [n] : [(n & 0x7f) | 0x80, ...uleb(n >>> 7)]);
const section = (id: number, body: number[]) => [id, ...uleb(body.length), ...body];
const name = (s: string) => [s.length, ...Buffer.from(s)];

function moduleBytes(): Uint8Array<ArrayBuffer> {
  const [q, m, idx, count, out, i, d, row, acc] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const code = [
    ...OP.i32Const(0), ...OP.set(i),
    ...OP.block,
    ...OP.get(count), ...OP.i32Eqz, ...OP.brIf(0),
    ...OP.loop,
    ...OP.get(m), ...OP.get(idx), ...OP.get(i), ...OP.i32Const(2), ...OP.i32Shl, ...OP.i32Add, ...OP.i32Load,
    ...OP.i32Const(DIM_BYTES), ...OP.i32Mul, ...OP.i32Add, ...OP.set(row),
    ...OP.v128Zero, ...OP.set(acc),
    ...OP.i32Const(0), ...OP.set(d),
    ...OP.loop,
    ...OP.get(acc),
    ...OP.get(q), ...OP.get(d), ...OP.i32Add, ...OP.v128Load,
    ...OP.get(row), ...OP.get(d), ...OP.i32Add, ...OP.v128Load,
    ...OP.f32x4Mul, ...OP.f32x4Add, ...OP.set(acc),
    ...OP.get(d), ...OP.i32Const(16), ...OP.i32Add, ...OP.tee(d), ...OP.i32Const(DIM_BYTES), ...OP.i32LtU, ...OP.brIf(0),
    ...OP.end,
    ...OP.get(out), ...OP.get(i), ...OP.i32Const(2), ...OP.i32Shl, ...OP.i32Add,
    ...OP.get(acc), ...OP.lane(0), ...OP.get(acc), ...OP.lane(1), ...OP.f32Add, ...OP.get(acc), ...OP.lane(2), ...OP.f32Add, ...OP.get(acc), ...OP.lane(3), ...OP.f32Add,
    ...OP.f32Store,
    ...OP.get(i), ...OP.i32Const(1), ...OP.i32Add, ...OP.tee(i), ...OP.get(count), ...OP.i32LtU, ...OP.brIf(0),
    ...OP.end,
    ...OP.end,
    ...OP.end,
  ];
  const body = [0x02, 0x03, 0x7f, 0x01, 0x7b, ...code]; // locals: 3 × i32, 1 × v128
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 5, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0]),
    ...section(3, [1, 0]),
    ...section(5, [1, 0x00, 1]),
    ...section(7, [2, ...name('dots'), 0x00, 0, ...name('mem'), 0x02, 0]),
    ...section(10, [1, ...uleb(body.length), ...body]),
  ]);
}

/**
 * One vector against many rows, in WebAssembly memory laid out by the caller: `matrix(capacity)`
 * is the rows' storage (re-read it after `reserve`, which may move it), and `dots(q, rows)`
 * returns the dot product of `q` with each listed row, in order (a view valid until the next call).
 */
export interface DotKernel {
  reserve(capacity: number): void;
  matrix(): Float32Array;
  dots(q: Float32Array, rows: Int32Array, count: number): Float32Array;
}

export function createDotKernel(initialCapacity = 1024): DotKernel | null {
  let instance: WebAssembly.Instance;
  try {
    instance = new WebAssembly.Instance(new WebAssembly.Module(moduleBytes()));
  } catch {
    return null;
  }
  const mem = instance.exports.mem as WebAssembly.Memory;
  const dots = instance.exports.dots as (q: number, m: number, idx: number, count: number, out: number) => void;
  // Layout: [q: 1,536 B][idx: cap × 4][out: cap × 4][matrix: cap × 1,536], 16-byte aligned.
  let cap = 0;
  const offsets = (c: number) => ({ idx: DIM_BYTES, out: DIM_BYTES + c * 4, matrix: DIM_BYTES + c * 8 + (16 - ((c * 8) % 16)) % 16 });
  const kernel: DotKernel = {
    reserve(capacity) {
      if (capacity <= cap) return;
      const next = Math.max(capacity, cap * 2);
      const before = offsets(cap);
      const after = offsets(next);
      const need = after.matrix + next * DIM_BYTES;
      if (need > mem.buffer.byteLength) mem.grow(Math.ceil((need - mem.buffer.byteLength) / 65_536));
      // The rows move up as the index and output regions grow (copyWithin handles the overlap).
      new Uint8Array(mem.buffer).copyWithin(after.matrix, before.matrix, before.matrix + cap * DIM_BYTES);
      cap = next;
    },
    matrix: () => new Float32Array(mem.buffer, offsets(cap).matrix, cap * 384),
    dots(q, rows, count) {
      if (count > cap) throw new RangeError('more rows than reserved');
      const o = offsets(cap);
      new Float32Array(mem.buffer, 0, 384).set(q);
      new Int32Array(mem.buffer, o.idx, count).set(rows.subarray(0, count));
      dots(0, o.matrix, o.idx, count, o.out);
      return new Float32Array(mem.buffer, o.out, count);
    },
  };
  kernel.reserve(initialCapacity);
  return kernel;
}
