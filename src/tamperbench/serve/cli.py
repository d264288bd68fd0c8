"""``tamperbench serve``: an OpenAI-compatible server over a local model, on loopback by default."""

from __future__ import annotations

import os
import socket
import sys
from typing import Annotated, Optional

import typer

from tamperbench.cli.options import DeviceOpt, DtypeOpt, ModelOpt
from tamperbench.errors import UserError

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def serve(
    model: ModelOpt = "embedded",
    host: Annotated[str, typer.Option("--host", help="Interface to bind (loopback unless told otherwise).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (0 = any free port; the chosen one is printed).")] = 8000,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Environment variable holding the API key "
                                                       "that every request must send as 'Authorization: Bearer KEY'.")] = None,
    served_name: Annotated[Optional[str], typer.Option("--served-model-name", help="Model name clients ask for "
                                                       "(default: the model spec).")] = None,
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, max=256, help="Concurrent requests decoded as one batch.")] = 16,
    max_queue: Annotated[int, typer.Option("--max-queue", min=0, max=100_000, help="Requests that may wait beyond the "
                                           "running batch (0: none; a request is taken only into a free row); past "
                                           "it the server answers 503 with Retry-After.")] = 64,
    max_connections: Annotated[int, typer.Option("--max-connections", min=1, max=100_000, help="Open connections "
                                                 "at once; one past it is closed when accepted.")] = 256,
    read_timeout: Annotated[float, typer.Option("--read-timeout", min=0.1, max=3600, help="Seconds a client has to "
                                                "send a whole request (headers and body); a slower one is closed.")] = 10.0,
    keep_alive_timeout: Annotated[int, typer.Option("--keep-alive-timeout", min=1, max=3600, help="Seconds an idle "
                                                    "connection is kept open between requests.")] = 5,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = None,
) -> None:
    """Serve /v1/models, /v1/chat/completions and /v1/completions over a local model."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port: must be 0 to 65535, got {port}")
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise UserError(f"--api-key-env: environment variable {api_key_env} is not set or empty")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        raise UserError(f"--host/--port: cannot bind {host}:{port} ({err.strerror or err})") from None
    if host not in LOOPBACK:
        print(f"warning: binding {host}: the server is reachable from other machines"
              + ("" if api_key else " and has no API key (use --api-key-env)"), file=sys.stderr)

    import uvicorn

    from tamperbench.models import load_backend
    from tamperbench.serve.app import create_app
    from tamperbench.serve.guard import ensure_fd_room, guarded_protocol

    ensure_fd_room(max_connections)

    backend = load_backend(model, device=device, dtype=dtype)
    name = served_name or model
    app = create_app(backend, model_name=name, api_key=api_key, max_batch=max_batch, max_queue=max_queue)
    bound = sock.getsockname()[1]
    print(f"serving {name} at http://{host}:{bound}/v1 (provenance {backend.provenance_id})", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2,
                            http=guarded_protocol(max_connections, read_timeout), timeout_keep_alive=keep_alive_timeout)
    uvicorn.Server(config).run(sockets=[sock])
