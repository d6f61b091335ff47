"""``holoxmc train``, ``holoxmc evaluate`` and ``holoxmc predict``.

``holoxmc train DATA --model hrr-fc --out RUN_DIR`` trains with the tuned preset of DATA
(any option given on the command line overrides it) and writes ``RUN_DIR/config.json``,
``RUN_DIR/model.safetensors``, for raw-text DATA ``RUN_DIR/text_encoder.json`` (the label
vocabulary, TF-IDF and tokenizer fitted on the training texts, which ``evaluate`` and
``predict`` apply to new texts) and, last, ``RUN_DIR/metrics.json``. While it runs,
``RUN_DIR/checkpoint.{safetensors,json}`` let ``--resume`` continue a killed run; they are
removed once the run is complete. Every file is written atomically.
"""

from __future__ import annotations

import argparse
import logging
import json
import os
import sys
from pathlib import Path
from typing import Any

from holoxmc.cli import finite_float, positive_int
from holoxmc.cli.data import add_cache_options, add_data_options, cache_dir, data_options
from holoxmc.cli.rundir import MARKER, check_run_dir, check_same_settings, claim_run_dir, recorded_settings, run_lock
from holoxmc.errors import InputError
from holoxmc.cli.options import add_setting_options
from holoxmc.settings import HEAD_OPTIONS as _HEAD_OPTIONS
from holoxmc.settings import SETTINGS

__all__ = ["register", "metrics_table", "train_params", "TEXT_ENCODER_FILE", "HISTORY_FILE", "MODEL_NAMES",
           "format_prediction", "parse_prediction", "solar_settings", "SOLAR_DECODING"]

#: the run's :class:`~holoxmc.data.text.TextEncoder`, written when it was trained on raw text
TEXT_ENCODER_FILE = "text_encoder.json"
#: ``--model`` choices: the keys of :data:`holoxmc.estimator.MODELS`, spelled out so that
#: building the parser (``--help``) does not import torch.
MODEL_NAMES = ("auto", "cnn", "fc", "hrr-cnn", "hrr-fc", "hrr-lstm", "linear", "lstm", "rerank", "solar", "xr-cnn",
               "xr-lstm")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train``, ``evaluate`` and ``predict`` to the ``holoxmc`` parser."""
    _register_train(subparsers)
    _register_evaluate(subparsers)
    _register_predict(subparsers)


def _register_train(subparsers: argparse._SubParsersAction) -> None:
    """``holoxmc train``: the data, the model, the run folder, then every setting's flag."""
    train = subparsers.add_parser(
        "train",
        help="train a model on a dataset and evaluate it on its test split",
        description="Train FC / HRR-FC (or CNN / LSTM variants), SOLAR or a linear one-vs-rest model "
        "with the dataset's tuned preset; options given here override the preset.",
    )
    train.add_argument("data", metavar="DATA",
                       help="registry name (bibtex, delicious, synthetic, ...), a dataset folder, or one data file "
                            "(with --test or --test-fraction). A folder's files are paired by name: the one "
                            ".txt/.svm/.svmlight/.libsvm file (or .gz) with the word 'train' in its name is the "
                            "training split and the one with 'test' the test split (my_train.svm / my_test.svm, "
                            "train.txt.gz / test.txt.gz); or train.jsonl / test.jsonl raw texts")
    train.add_argument("--test", type=Path, metavar="FILE",
                       help="score the trained model on this file (read at the training widths) instead of DATA's "
                            "test split")
    train.add_argument("--group-field", metavar="NAME",
                       help="the JSON-lines field naming each text's group (default: group): validation splits "
                            "keep each group on one side")
    train.add_argument("--test-fraction", type=finite_float, metavar="F",
                       help="hold out this share of DATA's rows (one data file) as the test split, by --seed; "
                            "the rows held out are never trained on")
    train.add_argument("--model", choices=MODEL_NAMES, default="auto",
                       help="model (default auto: the re-rank model, then FC while "
                            "--time-budget lasts, the best by validation P@1 finished on every row); "
                            "any other name trains exactly that model")
    train.add_argument("--preset", metavar="NAME",
                       help="start from a named preset (tuned on that data set: bibtex, delicious, debtags; or paper: "
                            "each paper's own configuration); "
                            "options given here override it. Default: the library defaults, on any data")
    train.add_argument("--out", type=Path, required=True, metavar="RUN_DIR", help="output folder")
    add_setting_options(train)  # every setting with a flag, from holoxmc.settings (its real default in --help)
    train.add_argument("--word-vectors", type=Path, metavar="FILE",
                       help="CNN/LSTM: start the word embeddings of the vocabulary's words from a GloVe-format text "
                            "file (a word and embed_dim numbers a line; plain or gzip)")
    train.add_argument("--resume", action="store_true",
                       help="continue the run in RUN_DIR (a folder holoxmc made, with the same options)")
    train.add_argument("--plot", action="store_true",
                       help=f"also draw RUN_DIR/{PLOT_FILE}, the curves of RUN_DIR/{HISTORY_FILE} (needs matplotlib)")
    add_data_options(train)
    add_cache_options(train)
    train.set_defaults(run=run_train)


def _register_evaluate(subparsers: argparse._SubParsersAction) -> None:
    """``holoxmc evaluate``: a trained run scored on a data split."""
    evaluate = subparsers.add_parser("evaluate", help="evaluate a trained model on a dataset split")
    evaluate.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    evaluate.add_argument("data", metavar="DATA", help="registry name or path")
    evaluate.add_argument("--split", choices=["train", "test"], default="test",
                          help="the split of a data set or folder to score (default test); a single file is "
                               "scored whole")
    evaluate.add_argument("--output", type=Path, metavar="FILE", help="JSON output (default RUN_DIR/eval-<DATA>-<split>.json)")
    evaluate.add_argument("--device", help="override the saved device")
    add_solar_decoding_options(evaluate, saved=True)
    add_threshold_options(evaluate, "also the F1 of the label sets that predict --threshold T makes")
    add_data_options(evaluate)
    evaluate.set_defaults(run=run_evaluate)


def _register_predict(subparsers: argparse._SubParsersAction) -> None:
    """``holoxmc predict``: a trained run's labels for every input point, written out."""
    predict = subparsers.add_parser("predict", help="write the top-k labels (or those above a threshold) "
                                                    "of every input point")
    predict.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    predict.add_argument("input", metavar="INPUT",
                         help="data file or registry name (its test split); for a run trained on raw text, "
                              "a .jsonl file of {\"text\": ...} lines (labels optional) or a text set")
    predict.add_argument("--top-k", type=positive_int, default=None,
                         help="labels per point (default: 5, or L if fewer; not with --threshold)")
    add_threshold_options(predict, "instead of the top k, every label whose confidence (HRR: the cosine; dense: "
                                   "the probability) exceeds T times the point's best one, best first "
                                   "(0.5 fared best across the sets measured)")
    predict.add_argument("--label-names", action="store_true",
                         help="write label names instead of indices (runs trained on raw text): each pair is name:score, "
                              "split at the last colon; a name that is empty, holds whitespace or starts with a "
                              "double quote is written as a JSON string (holoxmc.cli.train.parse_prediction reads "
                              "the lines back)")
    predict.add_argument("--output", type=Path, metavar="FILE", help="output file (default: stdout)")
    predict.add_argument("--device", help="override the saved device")
    add_solar_decoding_options(predict, saved=True)
    add_data_options(predict)
    predict.set_defaults(run=run_predict)


def add_threshold_options(parser: argparse.ArgumentParser, threshold_help: str) -> None:
    """``--threshold T`` and ``--absolute``: label sets by ``XMCClassifier.predict_above``."""
    parser.add_argument("--threshold", type=finite_float, default=None, metavar="T", help=threshold_help)
    parser.add_argument("--absolute", action="store_true",
                        help="with --threshold: compare the confidences with T itself (the HRR paper's "
                             "appendix H cuts at 0.5), not with T times the best")


#: SOLAR's decoding options (``SolarConfig`` fields of the same names): set by ``train``,
#: overridden for one call by ``evaluate`` and ``predict``.
SOLAR_DECODING = ("top_buckets", "min_freq", "min_freq_mode", "scoring")


def add_solar_decoding_options(parser: argparse.ArgumentParser, *, saved: bool = False) -> None:
    """``--top-buckets``, ``--min-freq``, ``--min-freq-mode`` and ``--scoring``: how SOLAR
    decodes (``saved``: for a trained model, instead of the settings it was saved with)."""

    add_setting_options(parser, SOLAR_DECODING, saved=saved)


def _solar_decoding(args: argparse.Namespace, clf: Any) -> dict[str, Any]:
    """The SOLAR decoding options given to ``evaluate`` or ``predict``; when there are any,
    ``clf`` (a loaded run) decodes with them for this call (its saved files are untouched).

    Raises:
        InputError: options given for a run that is no SOLAR model, or invalid for it.
    """
    given = {key: getattr(args, key) for key in SOLAR_DECODING if getattr(args, key) is not None}
    if given and not _redecodes(clf):
        raise InputError(f"--{next(iter(given)).replace('_', '-')} applies to SOLAR runs only; {args.run_dir} holds "
                         f"a {clf.head_!r} model")
    if given:
        clf.model_ = clf.model_.with_decoding(**given)
    return given


def _redecodes(clf: Any) -> bool:
    """Whether ``clf``'s served model can decode with other settings without retraining (a
    :class:`~holoxmc.models.solar.model.SolarModel`'s ``with_decoding``): a capability of the
    model, not a branch on its head's name."""
    return callable(getattr(clf.model_, "with_decoding", None))


def solar_settings(config: Any) -> dict[str, Any]:
    """The settings of a trained :class:`~holoxmc.models.solar.fit.SolarConfig` that its command-line
    options set, resolved (``min_freq``'s ``K // 2``, the bucket count, ...), as JSON values."""
    names = ("n_chunks", "n_buckets", "code_method", "feature_dim", *SOLAR_DECODING)
    return {name: getattr(config, name) for name in names}


def _check_threshold_options(args: argparse.Namespace) -> None:
    if args.absolute and args.threshold is None:
        raise InputError("--absolute applies to --threshold")


# ---------------------------------------------------------------------------- train
#: ``train`` options that override the dataset preset when given.
#: The estimator settings a ``train`` flag sets directly (the head options go through :data:`HEAD_OPTIONS`).
_OVERRIDES = tuple(s.name for s in SETTINGS if s.flag and not s.head_option)


#: ``train`` options that spread training over processes or a Ray cluster.
_JOB_OPTIONS = ("workers", "ray_address")


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _only(heads: set[str]) -> str:
    """The command-line models of ``heads``, as an error names them: ``--model solar only``,
    ``HRR models only (hrr-fc, hrr-cnn, hrr-lstm)``."""
    from holoxmc.presets import MODELS

    names = [name for name, (head, _) in MODELS.items() if head in heads]
    if len(names) == 1:
        return f"--model {names[0]} only"
    return f"{'/'.join(sorted(head.upper() for head in heads))} models only ({', '.join(names)})"


def _check_applies(model: str, params: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Refuse an option that does not apply to ``params["head"]``: read from its family
    (:data:`holoxmc.models.registry.FAMILIES`: settings, d', independent jobs), the selectors
    (:data:`holoxmc.auto.SELECTORS`) and the per-head options (:data:`HEAD_OPTIONS`).

    Raises:
        InputError: the first such option, naming the models it applies to.
    """
    from holoxmc.auto import SELECTORS
    from holoxmc.models.registry import FAMILIES, NETWORK_SETTINGS
    from holoxmc.presets import MODELS

    head = params["head"]
    kind, selector = FAMILIES.get(head), SELECTORS.get(head)
    network = [key for key in NETWORK_SETTINGS if key in overrides]
    if kind is not None and network and not kind.settings & set(NETWORK_SETTINGS):
        raise InputError(f"{_flag(network[0])} configures a network; --model {model} has none")
    if "dim" in overrides and not (kind is not None and kind.code_dim):
        raise InputError(f"--dim applies to {_only({name for name, f in FAMILIES.items() if f.code_dim})}")
    mine = _HEAD_OPTIONS.get(head, {})
    for options in _HEAD_OPTIONS.values():
        given = [key for key in options if key in overrides and key not in mine]
        if given:  # a flag of other heads only (one flag may serve a head option several share, as --loss)
            raise InputError(f"{_flag(given[0])} applies to "
                             f"{_only({owner for owner, keys in _HEAD_OPTIONS.items() if given[0] in keys})}")
    for name, other_selector in SELECTORS.items():
        given = [key for key in sorted(other_selector.settings) if key in overrides]
        if name != head and given:
            raise InputError(f"{_flag(given[0])} applies to {_only({name})}")
    apart = [key for key in _JOB_OPTIONS if key in overrides]
    jobs_apart = (kind.jobs_apart if kind is not None else selector is not None and selector.jobs_apart) \
        or overrides.get("n_models", params.get("n_models", 1)) > 1
    models = ", ".join(f"--model {name}" for name, (h, _) in MODELS.items() if h in FAMILIES and FAMILIES[h].jobs_apart)
    if apart and not jobs_apart:
        raise InputError(f"{_flag(apart[0])} applies to {models} and to --n-models above 1")
    if apart and selector is not None and kind is None:  # auto hands it to every candidate, its FC network too
        raise InputError(f"{_flag(apart[0])} does not apply to --model {model}: its FC candidate trains one network "
                         f"in this process; give {_flag(apart[0])} with {models}")


def train_params(data: str, model: str, overrides: dict[str, Any], preset: str | None = None) -> dict[str, Any]:
    """The ``XMCClassifier`` keywords of a run: the library defaults of ``model`` (or the named
    ``preset`` over them), then the explicit ``overrides``; PSP@k's propensity follows the
    data set's name (a scoring convention, see :func:`holoxmc.presets.propensity_preset`)."""
    from holoxmc.metrics import propensity_preset
    from holoxmc.presets import DATASET_PRESETS, model_params, paper_params, preset_params

    overrides = {key: value for key, value in overrides.items() if value is not None}
    name = Path(data).name if Path(data).exists() else data  # a folder's name, or the registry name
    if preset is not None and preset.lower() not in (*DATASET_PRESETS, "paper"):
        raise InputError(f"unknown preset {preset!r}; choose from {sorted(DATASET_PRESETS) + ['paper']}")
    if preset is not None and model == "auto":
        raise InputError(f"--preset {preset} sets a named model's settings: add --model (hrr-fc, fc, linear, solar, "
                         "...); --model auto (the default) trains each candidate at its library defaults")
    params: dict[str, Any] = (dict(model_params(model)) if preset is None
                              else paper_params(name, model) if preset.lower() == "paper"
                              else preset_params(preset, model))
    _check_applies(model, params, overrides)
    head_options = {field: overrides.pop(key) for key, field in _HEAD_OPTIONS.get(params["head"], {}).items()
                    if key in overrides}
    if head_options:
        params["head_options"] = dict(params.get("head_options") or {}) | head_options
    params["propensity"] = propensity_preset(name)
    params |= overrides
    if "hidden" in params:
        params["hidden"] = tuple(params["hidden"])
    return params


def run_train(args: argparse.Namespace) -> int:
    from holoxmc.distributed.data_parallel import join_from_environment, leaving_at_exit

    rank, world, args.device = join_from_environment(args.device)
    with leaving_at_exit():
        return _train(args, rank, world)


def _train(args: argparse.Namespace, rank: int, world: int) -> int:
    """``run_train`` in one process; under torchrun rank 0 alone writes and prints.

    Every input is checked before any work: the run folder (writable, not a file or a
    dangling link, not a folder holoxmc did not make), the options, and both data splits."""

    run_dir: Path = args.out
    finished = _of_rank_zero(world, _finished(run_dir))  # one view: no rank may wait for another
    if finished and not args.resume:
        raise InputError(f"{run_dir}: holds a finished run; choose another --out")
    if rank == 0:
        check_run_dir(run_dir, resume=args.resume)
    if args.plot:
        _check_plotting()

    options = (*_OVERRIDES, *(key for keys in _HEAD_OPTIONS.values() for key in keys))
    params = train_params(args.data, args.model, {key: getattr(args, key) for key in options}, preset=args.preset)
    settings = run_settings(args.model, params)
    if args.resume:  # before any work: a run of another model is neither continued nor called complete
        check_same_settings(run_dir, recorded_settings(run_dir), settings)
    if finished:
        if rank == 0:
            _complete(run_dir)
        return 0
    from holoxmc.models.registry import FAMILIES

    if world > 1 and params["head"] in FAMILIES and FAMILIES[params["head"]].jobs_apart:
        raise InputError(f"--model {args.model} trains independent jobs: use --workers or --ray-address, not torchrun")
    params["progress"] = False if args.quiet else None
    if args.word_vectors is not None and params["backbone"] == "fc":
        raise InputError("--word-vectors initialises the word embeddings of --model cnn, hrr-cnn, lstm or hrr-lstm")
    features = "tfidf" if params["backbone"] == "fc" else "tokens"
    load_options = data_options(args) | ({} if args.group_field is None else {"group_field": args.group_field})
    train, test, evaluation = _splits(args, features, load_options, seed=int(params.get("seed", 0)))
    _check_feature_memory(params, train.n_features, args.data)
    if rank == 0:
        _announce_estimate(params, train)
    X_train, X_test = train.inputs_for(params["backbone"]), test.inputs_for(params["backbone"])
    fit_params: dict[str, Any] = {} if train.groups is None else {"groups": train.groups}
    if args.word_vectors is not None:
        from holoxmc.data.embeddings import backbone_word_vectors

        tokenizer = None if train.encoder is None else train.encoder.tokenizer
        fit_params["word_vectors"] = backbone_word_vectors(args.word_vectors, params, tokenizer)
        print(fit_params["word_vectors"].summary(), file=sys.stderr)

    from holoxmc.estimator import XMCClassifier

    clf = XMCClassifier(**params)
    if rank > 0:  # trains its share of every batch; rank 0 reads and writes the run
        if _of_rank_zero(world, None) == "train":
            clf.fit(X_train, train.Y, run_dir=run_dir, resume=args.resume, **fit_params)
        return 0
    created = not run_dir.exists()
    claim_run_dir(run_dir)
    try:
        with run_lock(run_dir, settings, resume=args.resume):
            check_run_dir(run_dir, resume=args.resume)  # again under the lock: another run may have ended since
            if _of_rank_zero(world, "complete" if _finished(run_dir) else "train") == "complete":
                _complete(run_dir)
                return 0
            _fit_and_write(args, clf, train, test, X_train, X_test, load_options, evaluation, fit_params)
    except BaseException:
        if created:
            _remove_if_unused(run_dir)
        raise
    return 0


def run_settings(model: str, params: dict[str, Any]) -> dict[str, Any]:
    """What makes a run's model the model it is, recorded in its marker: ``--resume`` with
    other settings is refused (the families check the rest: epochs, widths, data)."""
    return {"model": model, "head": params["head"], "backbone": params["backbone"],
            "n_models": int(params.get("n_models") or 1)}


def _check_feature_memory(params: dict[str, Any], n_features: int, data: str) -> None:
    """Refuse, before training, a feature count (a data file's header claims it) that the
    model's per-feature memory cannot hold (:func:`holoxmc.limits.check_fit_memory`)."""
    from holoxmc.limits import check_fit_memory

    check_fit_memory(params, n_features, where=str(data))  # as fit does: before the features are built


def _announce_estimate(params: dict[str, Any], train: Any) -> None:
    """Say, before it starts, what a fit expected to take over
    :data:`~holoxmc.limits.ANNOUNCE_SECONDS` will cost (:func:`holoxmc.limits.estimate_fit`
    of the training split's shape; hidden by ``--quiet``)."""
    from holoxmc.limits import ANNOUNCE_SECONDS, estimate_fit

    estimate = estimate_fit(*_data_shape(train), head=str(params["head"]))
    if estimate is not None and estimate.seconds > ANNOUNCE_SECONDS:
        logging.getLogger("holoxmc").info(f"holoxmc: this fit is expected to take {estimate.summary()} "
                                          "(an estimate from the data's shape)")


def _data_shape(dataset: Any) -> tuple[int, int, int, int, int]:
    """``(rows, features, nnz, labels, label nnz)`` of a split's sparse features and labels."""
    X = dataset.X
    return X.shape[0], X.shape[1], int(X.nnz), dataset.Y.shape[1], int(dataset.Y.nnz)


def _of_rank_zero(world: int, value: Any) -> Any:
    """Rank 0's ``value`` on every rank (under torchrun; ``value`` itself in one process).

    Whether the run is finished is rank 0's view alone, the last one under the run's
    lock: were a rank to look for itself, a run that another process finished in between
    would have one rank train while rank 0 leaves, each waiting for the other for ever."""
    if world == 1:
        return value
    from holoxmc.distributed.data_parallel import from_rank_zero

    return from_rank_zero(value)


def _finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a finished run: its ``metrics.json`` beside its marker."""
    return (run_dir / "metrics.json").exists() and (run_dir / MARKER).is_file() \
        and not (run_dir / MARKER).is_symlink()


def _complete(run_dir: Path) -> None:
    """``--resume`` of a finished run: remove checkpoints a kill after ``metrics.json`` left,
    and say so."""
    _remove_checkpoints(run_dir)
    _remove_stale_temporaries(run_dir)
    print(f"{run_dir}: run already complete ({run_dir / 'metrics.json'})", file=sys.stderr)


#: The files a run writes last, atomically: a kill while one is written leaves ``.<name>.*.tmp``.
_FINAL_FILES = ("config.json", "model.safetensors", "text_encoder.json", "history.csv", "history.png", "metrics.json")


def _remove_stale_temporaries(run_dir: Path) -> None:
    """Remove the temporary files of :data:`_FINAL_FILES` that a kill during an earlier final
    save left (only regular files holoxmc names so, in the locked or finished run folder)."""
    for name in _FINAL_FILES:
        for stale in run_dir.glob(f".{name}.*tmp"):
            if stale.is_file() and not stale.is_symlink():
                stale.unlink(missing_ok=True)


def _splits(args: argparse.Namespace, features: str, load_options: dict[str, Any],
            seed: int) -> tuple[Any, Any, dict[str, Any]]:
    """``(train, test, evaluation)``: the training rows, the rows scored as "test", and what
    those are (``metrics.json``'s ``"evaluation"``). One data file is never scored on its own
    rows: it needs ``--test FILE`` or ``--test-fraction F``.

    Raises:
        InputError: one file without either, both given, ``--test-fraction`` with data that
            has its own test split, or an empty split.
    """
    from holoxmc.data import load, load_text_pair, text_split_file
    from holoxmc.data.dataset import holdout_split

    single_file = Path(args.data).is_file()
    if args.test is not None and args.test_fraction is not None:
        raise InputError("--test and --test-fraction choose the test rows in two ways: give one")
    if args.test_fraction is not None and not single_file:
        raise InputError(f"--test-fraction splits one data file; {args.data} has its own test split "
                         "(or give --test FILE)")
    if single_file and args.test is None and args.test_fraction is None:
        raise InputError(f"{args.data} is one data file, and a model is never scored on the rows it trained on: "
                         "give the test rows with --test FILE, or hold out a share of this file with "
                         "--test-fraction F (for example 0.2)")
    train_texts = None if args.test is None else text_split_file(args.data, "train")
    test_texts = None if args.test is None else text_split_file(args.test, "test")
    if train_texts is not None and test_texts is not None:  # raw texts: the test texts through the training encoder
        train, test = load_text_pair(train_texts, test_texts, features=features, **load_options)
        evaluation: dict[str, Any] = {"split": "test file", "file": str(args.test)}
        return _nonempty(args, train, test, evaluation)
    cache = cache_dir(args)  # a second run on the same files reads them prepared, not parsed again
    train = load(args.data, "train", features=features, cache_dir=cache, **load_options)
    widths = (train.n_features, train.n_labels)
    if args.test is not None:
        test = load(args.test, "test", features=features, widths=widths, cache_dir=cache, **load_options)
        evaluation = {"split": "test file", "file": str(args.test)}
    elif args.test_fraction is not None:
        train, test = holdout_split(train, args.test_fraction, seed)
        evaluation = {"split": "test fraction", "fraction": args.test_fraction, "seed": seed}
    else:
        test = load(args.data, "test", features=features, widths=widths, cache_dir=cache, **load_options)
        evaluation = {"split": "test split", "source": str(args.data)}
    return _nonempty(args, train, test, evaluation)


def _nonempty(args: argparse.Namespace, train: Any, test: Any,
              evaluation: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """``(train, test, evaluation)`` when both splits have rows."""
    for split, dataset in (("train", train), ("test", test)):
        if len(dataset) == 0:
            raise InputError(f"{args.data}: its {split} split has no data points")
    return train, test, evaluation


def _fit_and_write(args: argparse.Namespace, clf: Any, train: Any, test: Any, X_train: Any, X_test: Any,
                   load_options: dict[str, Any], evaluation: dict[str, Any],
                   fit_params: dict[str, Any] | None = None) -> None:
    """Train ``clf`` into the locked run folder ``args.out``, then write the model, the
    history, the text encoder and, last, ``metrics.json``."""
    from holoxmc.cli.report import fit_and_report
    from holoxmc.estimator import CONFIG_FILE, MODEL_FILE
    from holoxmc.io import atomic_write_json

    run_dir: Path = args.out
    metrics_path = run_dir / "metrics.json"
    metrics = fit_and_report(clf, X_train, train.Y, X_test, test.Y, run_dir=run_dir, resume=args.resume,
                             fit_params=fit_params)
    metrics["data"] = {"name": train.name, "train": len(train), "test": len(test),
                       "features": train.n_features, "labels": train.n_labels,
                       "source": str(args.data), "options": load_options}
    metrics["evaluation"] = evaluation
    metrics["settings"] = {"model": args.model, "preset": args.preset, "params": _json_params(clf)}
    if _redecodes(clf):
        metrics["settings"]["solar"] = solar_settings(clf.solar_.config)
    clf.save(run_dir)
    if train.encoder is not None:
        train.encoder.save(run_dir / TEXT_ENCODER_FILE)
    written = [run_dir / CONFIG_FILE, run_dir / MODEL_FILE]
    written += [run_dir / TEXT_ENCODER_FILE] if train.encoder is not None else []
    written.append(write_history(run_dir / HISTORY_FILE, _history_rows(clf)))
    if args.plot:
        written.append(plot_history(run_dir / HISTORY_FILE, run_dir / PLOT_FILE))
    atomic_write_json(metrics_path, metrics)
    _remove_checkpoints(run_dir)
    _remove_stale_temporaries(run_dir)
    if "selection" in metrics:
        from holoxmc.auto import read_trials, selection_table

        print(selection_table(read_trials(metrics["selection"], str(metrics_path))) + "\n")
    print(metrics_table(metrics["test"], title=f"{args.model} on {train.name} ({_described(evaluation)})"))
    print(f"\nwrote {', '.join(map(str, written))}, {metrics_path}")


def _described(evaluation: dict[str, Any]) -> str:
    """The test rows of a run in words, for its table title."""
    if evaluation["split"] == "test file":
        return f"test file {evaluation['file']}"
    if evaluation["split"] == "test fraction":
        return f"{evaluation['fraction']:g} of the rows held out, seed {evaluation['seed']}"
    return "test split"


def _json_params(clf: Any) -> dict[str, Any]:
    """The estimator's settings as JSON values (tuples as lists)."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in clf.get_params().items()}


#: The training history of a run: one row per epoch (or per liblinear fit) of every phase.
HISTORY_FILE = "history.csv"
#: ``--plot``: the loss and validation curves of ``history.csv``.
PLOT_FILE = "history.png"


def _history_rows(clf: Any) -> list[dict[str, Any]]:
    """The history of a fitted ``clf`` as flat rows: ``member`` (ensemble network, else 0),
    ``phase`` (``select`` or ``refit``), then the trainer's entries (``epoch``, ``seconds``,
    ``loss``, ``val_P@1``, ...), validation metrics flattened with a ``val_`` prefix."""
    results = getattr(clf, "fit_results_", None) or [clf.fit_result_]
    rows = []
    for member, result in enumerate(results):
        phases = [("select", result)] + ([("refit", result.refit)] if result.refit is not None else [])
        for phase, phase_result in phases:
            for entry in phase_result.history:
                row: dict[str, Any] = {"member": member, "phase": phase}
                for key, value in entry.items():
                    if isinstance(value, dict):
                        row.update({f"{key}_{inner}": item for inner, item in value.items()})
                    else:
                        row[key] = value
                rows.append(row)
    return rows


def write_history(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` (dicts) as CSV, atomically; the columns are the keys in first-seen order.

    Example:
        >>> import tempfile
        >>> path = write_history(Path(tempfile.mkdtemp()) / "h.csv", [{"epoch": 1, "loss": 0.5}])
        >>> path.read_text().splitlines()
        ['epoch,loss', '1,0.5']
    """
    import csv
    import io

    from holoxmc.io import atomic_write_text

    columns = list(dict.fromkeys(key for row in rows for key in row))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, text.getvalue())
    return path


def _check_plotting() -> None:
    """``--plot`` needs matplotlib: one clear error before training when it is missing."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("--plot draws with matplotlib, which is not installed: pip install matplotlib")


def plot_history(history: Path, output: Path) -> Path:
    """Draw the loss and validation curves of the CSV ``history`` (see :func:`write_history`)
    per epoch into the PNG ``output``, one line per member and phase."""
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with history.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    series = [column for column in (rows[0] if rows else {}) if column == "loss" or column.startswith("val_")]
    figure, axes = plt.subplots(1, max(len(series), 1), figsize=(4 * max(len(series), 1), 3), squeeze=False)
    for axis, column in zip(axes[0], series):
        runs = sorted({(row["member"], row["phase"]) for row in rows})
        for member, phase in runs:
            points = [(int(row["epoch"]), float(row[column])) for row in rows
                      if (row["member"], row["phase"]) == (member, phase) and row.get(column) not in (None, "")
                      and row.get("epoch") not in (None, "")]  # a linear stage's rows have no epoch
            if points:
                axis.plot(*zip(*points), marker=".", label=f"{phase} {member}" if len(runs) > 1 else phase)
        axis.set_xlabel("epoch")
        axis.set_title(column)
        if axis.lines:
            axis.legend(fontsize="small")
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(f".{output.name}.tmp")
    figure.savefig(temporary, format="png")
    plt.close(figure)
    temporary.replace(output)
    return output


def _remove_if_unused(run_dir: Path) -> None:
    """Remove a run folder this call created when it holds only the marker."""
    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= {MARKER}:
        (run_dir / MARKER).unlink(missing_ok=True)
        run_dir.rmdir()


def _remove_checkpoints(run_dir: Path) -> None:
    """Delete a finished run's training checkpoints: in ``run_dir``, its refit folder and,
    for an ensemble, each member's folder and its refit folder (removed once empty)."""
    from holoxmc.estimator import MEMBER_DIR
    from holoxmc.train import REFIT_DIR
    from holoxmc.train.checkpoint import CHECKPOINT_JSON, CHECKPOINT_TENSORS

    for phase in (run_dir, *sorted(run_dir.glob(f"{MEMBER_DIR}-*"))):
        for folder in (phase / REFIT_DIR, phase):
            for name in (CHECKPOINT_TENSORS, CHECKPOINT_JSON):
                (folder / name).unlink(missing_ok=True)
            if folder != run_dir and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


# ---------------------------------------------------------------------------- evaluate / predict
def _load_run(run_dir: Path, device: str | None, *, served: bool) -> Any:
    """The classifier saved in ``run_dir``: with ``served`` (only top-k predictions are
    needed), a :class:`~holoxmc.serving.ServedClassifier` where its model needs neither torch
    nor scikit-learn (the linear and re-rank models: ``predict`` and ``evaluate`` then start
    in well under a second, docs/results/speed.md, "CLI start-up"), else ``XMCClassifier.load``
    (the same checks and errors either way)."""
    if served:
        from holoxmc.serving import load_served

        clf = load_served(run_dir, device=device)
        if clf is not None:
            return clf
    from holoxmc.estimator import XMCClassifier

    return XMCClassifier.load(run_dir, device=device)


def run_evaluate(args: argparse.Namespace) -> int:
    from holoxmc.cli.report import recall_cutoffs
    from holoxmc.io import atomic_write_json
    from holoxmc.metrics import label_set_f1

    _check_threshold_options(args)
    output = args.output or args.run_dir / f"eval-{Path(str(args.data)).name}-{args.split}.json"
    _check_output_file(output)  # before any work: a read-only run folder is refused now, not after scoring
    clf = _load_run(args.run_dir, args.device, served=args.threshold is None)
    overridden = _solar_decoding(args, clf)
    options = _options_for(args.run_dir, args.data, data_options(args))
    inputs, Y, name, _ = _run_inputs(args.run_dir, clf, args.data, args.split, options, labels=True)
    metrics = clf.evaluate(inputs, Y, recall_ks=recall_cutoffs(clf.n_labels_))
    scored = "every row of the file" if Path(str(args.data)).is_file() else f"its {args.split} split"
    report: dict[str, Any] = {"data": str(args.data), "split": "file" if Path(str(args.data)).is_file() else args.split,
                              "rows": int(Y.shape[0]), "metrics": metrics}
    if _redecodes(clf):  # how it decoded, and which settings this call overrode
        report["settings"] = {"solar": solar_settings(clf.solar_.config), "overridden": sorted(overridden)}
    sets = None
    if args.threshold is not None:
        sets = label_set_f1(clf.predict_above(inputs, args.threshold, relative=not args.absolute), Y)
        report["label_sets"] = {"threshold": args.threshold, "relative": not args.absolute, **sets}
    atomic_write_json(output, report)
    print(metrics_table(metrics, title=f"{args.run_dir} on {name} ({scored}, {Y.shape[0]} rows)"))
    if overridden:
        print("SOLAR decoding for this call: " + ", ".join(f"{key}={value}" for key, value in overridden.items()))
    if sets is not None:
        cut = f"> {args.threshold}" + ("" if args.absolute else " x best")
        print(f"\nlabel sets {cut}: micro-F1 {sets['micro-F1']:.2f}, example-F1 {sets['example-F1']:.2f}, "
              f"{sets['labels per point']:.2f} labels per point")
    print(f"\nwrote {output}")
    return 0


def _check_output_file(path: Path) -> None:
    """Refuse, before the work that produces it, an output file that cannot be written: a
    folder, a path under a file, a read-only file or folder, or anything but a new path or
    a regular file (a link, FIFO or device would be replaced: :func:`holoxmc.io.check_writable_target`).

    Raises:
        InputError: ``"<path>: cannot write it (<why>)"``.
    """
    from holoxmc.io import check_writable_target

    if path.is_dir() and not path.is_symlink():
        raise InputError(f"{path}: cannot write it (Is a directory)")
    check_writable_target(path)
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{path}: cannot write it (the file is read-only)")
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists() or p.is_symlink())
    if not folder.is_dir():
        raise InputError(f"{path}: cannot write it ({folder} is a file, not a folder)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write it ({folder} is read-only)")


def _options_for(run_dir: Path, data: str, given: dict[str, Any]) -> dict[str, Any]:
    """The ``load`` options for ``data``: those given, or else, when ``data`` is what the run
    trained on, the options it trained with (so ``evaluate RUN synthetic`` meets the same set);
    none for a run with a text encoder, which fixed the options of raw texts when it trained."""
    from holoxmc.io import read_json

    metrics_path = run_dir / "metrics.json"
    if given or (run_dir / TEXT_ENCODER_FILE).exists() or not metrics_path.exists():
        return given
    trained_on = read_json(metrics_path, what="metrics file").get("data", {})  # bounded, a regular file
    if not isinstance(trained_on, dict) or trained_on.get("source") != str(data):
        return given
    options = trained_on.get("options") or {}
    if not isinstance(options, dict):
        raise InputError(f"{metrics_path}: 'data.options' must be a JSON object, got {options!r}")
    return dict(options)


def _run_inputs(
    run_dir: Path, clf: Any, data: str, split: str, options: dict[str, Any], *, labels: bool
) -> tuple[Any, Any, str, Any]:
    """``(model inputs, Y or None, name, text encoder or None)`` of ``split`` of ``data`` as
    the run at ``run_dir`` (its estimator ``clf``) saw its training data: raw texts go
    through the run's saved text encoder, never one fitted on ``data`` itself (so ``options``,
    the ``load`` options, apply to other data only); feature files are read at the model's
    widths (labels only when they are scored)."""
    from holoxmc.data import TextEncoder, load, read_jsonl, text_split_file
    from holoxmc.data.text import labels_to_csr

    text_file = text_split_file(data, split)
    encoder_file = run_dir / TEXT_ENCODER_FILE
    if encoder_file.exists():
        if text_file is None:
            raise InputError(f"{run_dir} was trained on raw text, and {data} has none: give a .jsonl file of "
                             '{"text": ...} lines, a folder with train/test .jsonl files, or a text set such as debtags')
        if options:
            raise InputError(f"{run_dir} encodes raw text with its saved text encoder; --data-option and "
                             "--text-features do not apply")
        encoder = TextEncoder.load(encoder_file)
        _check_encoder_sizes(encoder, clf, encoder_file)
        records = read_jsonl(text_file, require_labels=labels)
        inputs = encoder.features(records.texts) if clf.backbone == "fc" else encoder.tokens(records.texts)
        Y = labels_to_csr(records, encoder.labels, text_file) if labels else None
        return inputs, Y, Path(str(data)).name, encoder
    if text_file is not None and Path(str(data)).is_file():
        raise InputError(f"{run_dir} has no {TEXT_ENCODER_FILE} (it was trained on feature vectors, or by an older "
                         f"holoxmc), so it cannot encode the raw texts of {data}")
    dataset = load(data, split, features="tfidf" if clf.backbone == "fc" else "tokens",
                   widths=(clf.n_features_ if clf.backbone == "fc" else None, clf.n_labels_ if labels else None),
                   **options)
    if len(dataset) == 0:
        raise InputError(f"{data}: no data points" + ("" if Path(str(data)).is_file() else f" in its {split} split"))
    return dataset.inputs_for(clf.backbone), dataset.Y, dataset.name, None


def _check_encoder_sizes(encoder: Any, clf: Any, where: Path) -> None:
    """A run's text encoder must name every label of its model (and, for FC, make its features).

    Raises:
        InputError: ``"<where>: names 3 labels; the model has 10"``.
    """
    if len(encoder.labels) != clf.n_labels_:
        raise InputError(f"{where}: names {len(encoder.labels)} labels; the model has {clf.n_labels_} (edited, or "
                         "from another run)")
    terms = encoder.n_features
    if clf.backbone == "fc" and terms != clf.n_features_:
        raise InputError(f"{where}: makes {terms} features; the model reads {clf.n_features_} (edited, or from "
                         "another run)")


def run_predict(args: argparse.Namespace) -> int:
    import numpy as np

    from holoxmc.io import atomic_write_text

    _check_threshold_options(args)
    if args.threshold is not None and args.top_k is not None:
        raise InputError("--top-k and --threshold choose the labels in two ways: give one")
    if args.output is not None:
        _check_output_file(args.output)
    clf = _load_run(args.run_dir, args.device, served=args.threshold is None)
    _solar_decoding(args, clf)
    options = _options_for(args.run_dir, args.input, data_options(args))
    inputs, _, _, encoder = _run_inputs(args.run_dir, clf, args.input, "test", options, labels=False)
    saved_names = clf.classes_.tolist() if clf.classes_.dtype == object else None  # fitted on label names
    if args.label_names and encoder is None and saved_names is None:
        raise InputError(f"{args.run_dir} has no label names: it was not trained on raw text nor fitted on names")
    names = (encoder.labels if encoder is not None else saved_names) if args.label_names else None
    if args.threshold is None:
        indices, scores = clf.predict_topk(inputs, min(5, clf.n_labels_) if args.top_k is None else args.top_k)
        rows = list(zip(indices.tolist(), scores.tolist()))
    else:
        found = clf.predict_above(inputs, args.threshold, relative=not args.absolute)
        rows = []
        for start, stop in zip(found.indptr[:-1], found.indptr[1:]):
            labels, values = found.indices[start:stop], found.data[start:stop]
            order = np.lexsort((labels, -values))  # best first; ties by label id
            rows.append((labels[order].tolist(), values[order].tolist()))
    text = "".join(  # SOLAR marks ranks its candidates could not fill with -1: those are left out
        " ".join(format_prediction(label if names is None else names[label], score)
                 for label, score in zip(row_labels, row_scores) if label >= 0) + "\n"
        for row_labels, row_scores in rows
    )
    if args.output is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(args.output, text)
        print(f"wrote {len(rows)} lines to {args.output}", file=sys.stderr)
    return 0


def _needs_quoting(name: str) -> bool:
    return not name or name[0] == '"' or any(char.isspace() for char in name) or not name.isprintable()


def _is_utf8(name: str) -> bool:
    """Whether ``name`` can be written as UTF-8 (a lone surrogate such as ``"\\ud800"``,
    which JSON allows in a label name, cannot)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def format_prediction(label: int | str, score: float) -> str:
    """One ``label:score`` pair of ``predict``'s output. A label name that is empty, holds
    whitespace or a non-printable character, or starts with ``"`` is written as a JSON string,
    so that the pairs of a line stay separated by single spaces and read back exactly with
    :func:`parse_prediction`.

    Example:
        >>> format_prediction(7, 0.5), format_prediction("machine learning", 0.25)
        ('7:0.5', '"machine learning":0.25')
    """
    if isinstance(label, str) and _needs_quoting(label):  # a lone surrogate is written as its \\u escape
        text = json.dumps(label, ensure_ascii=not _is_utf8(label))
    else:
        text = str(label)
    return f"{text}:{score:.6g}"


def parse_prediction(line: str) -> list[tuple[str, float]]:
    """The ``(label, score)`` pairs of one line of ``predict``'s output (labels as text).

    Raises:
        InputError: the line is not in that format.

    Example:
        >>> parse_prediction('"a b":0.9 c:d:0.5 3:0.1')
        [('a b', 0.9), ('c:d', 0.5), ('3', 0.1)]
    """
    pairs: list[tuple[str, float]] = []
    decoder = json.JSONDecoder()
    position, line = 0, line.rstrip("\n")
    while position < len(line):
        if line[position] == '"':
            try:
                label, position = decoder.raw_decode(line, position)
            except ValueError:
                raise InputError(f"unterminated quoted label at column {position + 1}: {line!r}") from None
            if line[position : position + 1] != ":":
                raise InputError(f"no ':score' after the quoted label at column {position + 1}: {line!r}")
            end = line.find(" ", position)
            end = len(line) if end < 0 else end
            score_text = line[position + 1 : end]
        else:
            end = line.find(" ", position)
            end = len(line) if end < 0 else end
            label, colon, score_text = line[position:end].rpartition(":")
            if not colon:
                raise InputError(f"no ':score' in {line[position:end]!r}: {line!r}")
        try:
            pairs.append((label, float(score_text)))
        except ValueError:
            raise InputError(f"not a score: {score_text!r} in {line!r}") from None
        position = end + 1
    return pairs


def metrics_table(metrics: dict[str, float], title: str = "") -> str:
    """:func:`holoxmc.cli.report.metrics_table`, imported when first called (so ``--help``
    imports no torch)."""
    from holoxmc.cli.report import metrics_table as table

    return table(metrics, title)
