"""Distributed training on Ray: SOLAR's chunks as Ray tasks.

SOLAR's K chunk networks share nothing while they train, so each runs as one Ray task;
the training rows go into Ray's object store once and every task reads them from there.
``ray_address`` takes ``"auto"`` (the cluster this machine belongs to),
``"ray://host:10001"`` (a remote cluster) or ``"local"`` (a new local instance); here the
example starts a two-CPU local Ray itself, and holoxmc uses that session. The same
``ray_address`` also runs an ensemble's networks (``n_models``) and the linear model's label
blocks as tasks. On the command line: ``holoxmc train DATA --model solar --ray-address auto``.

Needs Ray (``pip install 'holoxmc[ray]'``); without it the example says so and exits.

Run: ``python examples/ray_distributed.py`` (Ray's start-up takes some seconds).
"""

from __future__ import annotations

import importlib.util

from holoxmc import XMCClassifier, load


def main() -> None:
    import ray

    sizes = {"n_points": 1500, "n_test": 300, "n_labels": 200, "n_features": 500, "seed": 0}
    train, test = load("synthetic", **sizes), load("synthetic", split="test", **sizes)
    ray.shutdown()  # a session left by earlier code in this process: start our own, which holoxmc then uses
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        clf = XMCClassifier(head="solar", head_options={"n_chunks": 2}, hidden=(64,), epochs=3, seed=0,
                            ray_address="auto", progress=False)
        clf.fit(train.X, train.Y)   # two chunk networks, each one Ray task
        metrics = clf.evaluate(test.X, test.Y, ks=(1, 5))
        print("Ray cluster:", ray.cluster_resources().get("CPU"), "CPUs;",
              {name: round(metrics[name], 2) for name in ("P@1", "P@5")})
        assert metrics["P@1"] > 0
    finally:
        ray.shutdown()


if __name__ == "__main__":
    if importlib.util.find_spec("ray") is None:
        print("skipped: Ray is not installed (pip install 'holoxmc[ray]')")
    else:
        main()
