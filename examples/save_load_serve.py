"""Save a fitted model, load it back, and serve predictions over HTTP.

A saved model is a folder: ``config.json`` (settings, sizes, the versions that wrote it)
and ``model.safetensors`` (the weights). Nothing is pickled, so loading a folder runs no
code from it. ``XMCClassifier.load`` gives back a model that predicts exactly as the one
saved. The server below is Python's standard ``http.server``: it loads the model once and
answers ``POST /predict`` with a JSON body ``{"features": {"12": 0.5, ...}, "k": 3}``.

Run: ``python examples/save_load_serve.py`` (seconds; it starts the server on a free port,
sends one request, and stops it).
"""

from __future__ import annotations

import json
import tempfile
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from holoxmc import XMCClassifier, load


def make_handler(clf: XMCClassifier) -> type[BaseHTTPRequestHandler]:
    """A request handler that scores one row of features with ``clf``."""

    class Predict(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            columns = [int(c) for c in body["features"]]
            row = sp.csr_matrix((list(body["features"].values()), ([0] * len(columns), columns)),
                                shape=(1, clf.n_features_in_), dtype=np.float32)
            labels, scores = clf.predict_topk(row, int(body.get("k", 5)))
            answer = json.dumps({"labels": labels[0].tolist(), "scores": [round(float(s), 4) for s in scores[0]]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer.encode())

        def log_message(self, *args: object) -> None:  # keep the example's output short
            pass

    return Predict


def main(folder: Path) -> None:
    sizes = {"n_points": 600, "n_test": 100, "n_labels": 50, "n_features": 400, "seed": 0}
    train, test = load("synthetic", **sizes), load("synthetic", split="test", **sizes)
    clf = XMCClassifier(head="linear", seed=0).fit(train.X, train.Y)
    clf.save(folder / "model")
    print("saved:", sorted(p.name for p in (folder / "model").iterdir()))

    served = XMCClassifier.load(folder / "model")
    assert np.array_equal(served.predict_topk(test.X, 5)[1], clf.predict_topk(test.X, 5)[1])
    assert (served.predict(test.X) != clf.predict(test.X)).nnz == 0
    print("loaded model ranks and labels every test row exactly as the fitted one")

    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(served))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        row = test.X[0]
        request = {"features": {str(c): float(v) for c, v in zip(row.indices, row.data)}, "k": 3}
        url = f"http://127.0.0.1:{server.server_address[1]}/predict"
        reply = urllib.request.urlopen(urllib.request.Request(url, json.dumps(request).encode()), timeout=30)
        answer = json.loads(reply.read())
        print("POST /predict ->", answer, "| true labels:", test.Y[0].indices.tolist())
        assert answer["labels"] == clf.predict_topk(test.X[:1], 3)[0][0].tolist()
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="holoxmc-serve-") as tmp:
        main(Path(tmp))
