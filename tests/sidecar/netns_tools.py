"""Tiny TCP tools the sidecar tests run inside network namespaces (`ip netns exec NS python netns_tools.py ...`).

  echo-server PORT LOG   echo every chunk back; append each received chunk to LOG (one line)
  roundtrip HOST PORT TIMEOUT   connect, send "ping", wait for the echo; print the seconds taken,
                                or exit 3 on timeout, 4 on connection reset/refused
"""
import socket
import sys
import threading
import time


def echo_server(port: int, log: str) -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)
    print("ready", flush=True)

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                with open(log, "a") as f:
                    f.write(data.decode(errors="replace") + "\n")
                conn.sendall(data)

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def roundtrip(host: str, port: int, timeout: float) -> int:
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"ping")
            if s.recv(16) != b"ping":
                return 5
    except (ConnectionResetError, ConnectionRefusedError):
        return 4
    except (socket.timeout, TimeoutError):
        return 3
    print(f"{time.monotonic() - start:.4f}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "echo-server":
        echo_server(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "roundtrip":
        sys.exit(roundtrip(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
    else:
        sys.exit(f"unknown tool {sys.argv[1]!r}")
