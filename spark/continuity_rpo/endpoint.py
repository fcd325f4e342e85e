"""An HTTPS endpoint that serves a Prometheus registry to one user: the brokers' monitoring user, whom Prometheus
already scrapes the brokers' metrics as (HTTP Basic, over TLS with a certificate of the estate's CA)."""

from __future__ import annotations

import base64
import hmac
import socketserver
import ssl
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app


class _QuietHandler(WSGIRequestHandler):
    timeout = 10  # a client that connects and sends nothing holds its own thread this long, never the server's

    def log_message(self, *_args):  # a scrape every few seconds would fill the journal
        pass


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 16

    def handle_error(self, request, client_address):
        # One line per failed client (no TLS, a certificate it refused, gone mid-request), not a traceback.
        print(f"endpoint: {client_address[0]}: {sys.exc_info()[1]!r}", file=sys.stderr, flush=True)


def _basic_auth(app, user: str, password: str):
    expected = ("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()).encode()

    def authenticated(environ, start_response):
        if not hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", "").encode(), expected):
            start_response("401 Unauthorized", [("Content-Type", "text/plain"),
                                                ("WWW-Authenticate", 'Basic realm="continuity-rpo"')])
            return [b"log in as the monitoring user\n"]
        return app(environ, start_response)

    return authenticated


def serve(registry: CollectorRegistry, endpoint: dict, user: str, password: str) -> WSGIServer:
    """Serve ``registry`` at https://<endpoint.address>:<endpoint.port>/metrics (any path) from a thread of its own;
    ``server.shutdown()`` stops it. The TLS handshake runs in each request's thread, not in the one that accepts."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(endpoint["certificate"], endpoint["key"])
    server = make_server(endpoint["address"], endpoint["port"], _basic_auth(make_wsgi_app(registry), user, password),
                         server_class=_ThreadingServer, handler_class=_QuietHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, name="endpoint", daemon=True).start()
    return server
