# A TCP client with a tiny receive buffer, for tests of what a server holds for a client that does
# not read. Node sets neither SO_RCVBUF nor TCP_MAXSEG on a TCP socket, and with a paused Node
# socket on loopback the server's kernel absorbs megabytes (measured: 2.8 MB with a 4 KiB receive
# buffer alone; 65 KB with 1200-byte segments), so the server would never see backpressure.
# Usage: python3 tiny-window-client.py HOST PORT REQUEST_HEX
# Sends the request, then reads nothing until a command arrives on stdin:
#   read            read everything until the connection ends
#   trickle N MS    read at most N bytes, sleep MS, repeat until the connection ends
# What it read goes to stdout; at the end one line on stderr: "end eof" or "end reset".
import socket
import sys
import time

host, port, request = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
# Segments as small as on a real network: the sender's kernel sizes its send buffer by segments, and
# loopback's 64 KB ones would let it absorb megabytes for a client that reads nothing.
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1200)
s.connect((host, port))
s.sendall(request)
sys.stderr.write("sent\n")
sys.stderr.flush()
cmd = sys.stdin.readline().split()
while not cmd:  # stdin closed without a command: never read
    time.sleep(3600)
size, pause = (int(cmd[1]), int(cmd[2]) / 1000) if cmd and cmd[0] == "trickle" else (65536, 0)
out = sys.stdout.buffer
how = "eof"
try:
    while True:
        chunk = s.recv(size)
        if not chunk:
            break
        out.write(chunk)
        out.flush()
        if pause:
            time.sleep(pause)
except ConnectionResetError:
    how = "reset"
sys.stderr.write("end " + how + "\n")
sys.stderr.flush()
