// Connections whose client stopped reading. Node keeps what an answer could not yet hand to the
// kernel in the process's memory, and keeps the socket for as long as the client holds it open: it
// has no timeout for a write that never completes (`server.timeout` is 0, and a timeout there would
// also end the JSON waits for a query's result, which write nothing for up to QUERY_DEADLINE_MS).
// 100 connections pipelining requests for a large answer (the 95 KB OpenAPI document needs no key)
// and never reading grew the API's memory by about 120 MB, for as long as they stayed open: enough
// of them would take the memory of the process every organization's requests share.
//
// So every few seconds the open connections with bytes still waiting to be written are looked at:
// one whose waiting bytes have not moved for RESPONSE_STALL_TIMEOUT_MS is destroyed, freeing them. A
// slow reader is never cut (each byte it takes moves them), nor is a connection with nothing left
// to write (a query waiting for its result, an idle keep-alive).
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export class StalledConnections {
  /** Connections destroyed because their client stopped reading (the metric's total). */
  closed = 0;
  private readonly sockets = new Set<Socket>();
  /** Per waiting connection: the bytes handed on when it was last seen moving, and when. */
  private readonly waiting = new Map<Socket, { handedOn: number; since: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    server: Server,
    private readonly stallMs: number,
    everyMs = Math.max(250, Math.min(5_000, Math.floor(stallMs / 3))),
  ) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => {
        this.sockets.delete(socket);
        this.waiting.delete(socket);
      });
    });
    this.timer = setInterval(() => this.sweep(Date.now()), everyMs).unref();
  }

  private sweep(now: number) {
    for (const socket of this.sockets) {
      if (socket.destroyed || socket.writableLength === 0) {
        this.waiting.delete(socket);
        continue;
      }
      // bytesWritten counts what is still buffered too: what left the process is the difference.
      const handedOn = socket.bytesWritten - socket.writableLength;
      const seen = this.waiting.get(socket);
      if (!seen || seen.handedOn !== handedOn) this.waiting.set(socket, { handedOn, since: now });
      else if (now - seen.since >= this.stallMs) {
        this.waiting.delete(socket);
        this.closed += 1;
        socket.destroy();
      }
    }
  }

  stop() {
    clearInterval(this.timer);
  }
}
