"""Every setting a user can give, declared once: its name, default, allowed forms, help text,
command-line flag (or why it has none) and the model families it applies to.

The estimator's signature reads its defaults from :data:`DEFAULTS`, its checks are
:data:`ESTIMATOR_CONSTRAINTS`, the ``holoxmc train`` options (with their defaults in
``--help``) are built from :data:`SETTINGS` by :func:`holoxmc.cli.options.add_setting_options`,
and the head configurations (:class:`~holoxmc.models.solar.config.SolarConfig`, the HRR head,
the linear and re-rank configurations) read their defaults from :func:`option_default`.
Adding a setting is one row here plus the code that uses it (docs/design.md shows the steps).

Tuned values per data set and per head kind stay in :mod:`holoxmc.presets`: they are layers
over these defaults, not declarations.

Example:
    >>> DEFAULTS["time_budget"], SETTING["epochs"].flag
    (60.0, '--epochs')
    >>> option_default("solar", "n_chunks"), HEAD_OPTIONS["solar"]["chunks"]
    (8, 'n_chunks')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from holoxmc.presets import BACKBONE_DEFAULTS, DEFAULT_PROPENSITY, HEAD_DEFAULTS, RERANK_SHORTLIST
from holoxmc.constraints import Constraint, Instance, Integer, IntegerSequence, Options, Real, RealPair

__all__ = ["Setting", "PerHead", "OPTION_OWNERS", "SETTINGS", "SETTING", "DEFAULTS", "ESTIMATOR_CONSTRAINTS", "SETTING_NAMES", "HEAD_OPTIONS",
           "HEAD_SETTINGS", "ALL_HEADS", "NETWORK_HEADS", "FC_HEADS", "LINEAR_C_GRID", "heads_taking", "for_head",
           "untaken_defaults", "option_default", "default_text"]

#: Every head kind (``"auto"`` chooses among them).
ALL_HEADS = ("auto", "hrr", "dense", "solar", "linear", "rerank", "xr")
#: The heads that train networks through the shared trainer.
NETWORK_HEADS = ("hrr", "dense", "solar", "xr")
#: The network heads on the FC backbone (``xr`` takes token ids: its sizes are head options).
FC_HEADS = ("hrr", "dense", "solar")

#: C values the linear model tries when ``C`` is ``None``: one value, chosen leave one set out
#: on a panel of six sets (``benchmarks/tuning/defaults_loo.py``, docs/tuning.md "Library
#: defaults, leave one set out"): the old grid (0.1, 0.3, 1, 3) scored at most 0.5 P@1 above it
#: on any set for four times the fits. A one-value grid still carves the validation split that
#: fits the confidence calibration.
LINEAR_C_GRID: tuple[float, ...] = (0.3,)


class PerHead(dict):
    """A head option's default that differs by head kind (``PerHead(hrr="cosine", solar="full")``).

    Example:
        >>> PerHead(hrr="cosine", solar="full")["solar"]
        'full'
    """

    def __repr__(self) -> str:
        return ", ".join(f"{head} {value}" for head, value in self.items())


#: The head kinds whose options ``holoxmc train`` passes on (``xr`` trains with the HRR
#: network's library options; its own keywords are ``head_options``).
OPTION_OWNERS = ("hrr", "solar", "linear", "rerank")


@dataclass(frozen=True)
class Setting:
    """One setting.

    Args:
        name: the ``XMCClassifier`` keyword, or the head-option key (``head_options[name]``).
        default: its value when not given (``None``: decided as ``shown`` says; a
            :class:`PerHead` where a head option's default differs by head kind).
        help: what it does, one sentence, without the default.
        heads: the head kinds it applies to.
        flag: its ``holoxmc train`` option, or ``None`` with a ``reason``.
        reason: why it has no flag.
        allowed: its allowed forms (:mod:`holoxmc.validation`; ``None``: the value ``None``).
        head_option: a ``head_options`` key of the heads in ``heads``, not an estimator keyword.
        shown: how ``--help`` states the default, where the value alone does not say it.
        cli: argparse keywords besides ``type``, ``help`` and ``dest`` (``metavar``, ``nargs``, ``choices``).
    """

    name: str
    default: Any
    help: str
    heads: tuple[str, ...] = ALL_HEADS
    flag: str | None = None
    reason: str = ""
    allowed: tuple[Constraint | None, ...] = ()
    head_option: bool = False
    shown: str | None = None
    cli: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dest(self) -> str:
        """The argparse destination of :attr:`flag` (``--label-code`` → ``label_code``)."""
        return (self.flag or "").lstrip("-").replace("-", "_")


#: The head kinds with network defaults of their own (``xr`` trains the HRR head's network).
_OWN_DEFAULTS = ("hrr", "dense", "solar")


def _per_head(name: str) -> str:
    """``--help``'s default of a setting each head kind (and text backbone) sets on its own."""
    heads = {head: HEAD_DEFAULTS[head][name] for head in _OWN_DEFAULTS if name in HEAD_DEFAULTS[head]}
    backbones = {backbone: values[name] for backbone, values in BACKBONE_DEFAULTS.items() if name in values}
    text = "per head: " + ", ".join(f"{head} {value}" for head, value in heads.items())
    return text + ("; on the " + ", ".join(f"{b} backbone {v}" for b, v in backbones.items()) if backbones else "")


def _network(name: str, default: Any, help: str, allowed: tuple[Constraint | None, ...],
             heads: tuple[str, ...] = NETWORK_HEADS, **kw: Any) -> Setting:
    return Setting(name, default, help, heads, flag="--" + name.replace("_", "-"), allowed=allowed, **kw)


POSITIVE, NON_NEGATIVE = Integer(1), Integer(0)
BOOL = Instance(bool, "true or false")

#: The one declaration of every setting.
SETTINGS: tuple[Setting, ...] = (
    # --- what is trained
    Setting("head", "auto", "the model family: auto, hrr, dense, solar, linear, rerank or xr",
            reason="--model NAME sets head and backbone together (holoxmc.presets.MODELS)",
            allowed=(Instance(str, "a head name"),)),
    Setting("backbone", "fc", "fc (sparse features), cnn or lstm (token ids)",
            reason="--model NAME sets head and backbone together (holoxmc.presets.MODELS)",
            allowed=(Options(("fc", "cnn", "lstm")),)),
    Setting("head_options", None, "the head's own keywords ({'learn_pm': True}, SolarConfig's, LinearConfig's, ...)",
            reason="each head option has a flag of its own (the head-option rows of this table)",
            allowed=(Instance(dict, "a dict"), None)),
    Setting("dim", 400, "HRR dimension d'", ("hrr", "xr"), flag="--dim", allowed=(Integer(2),)),
    # --- the network
    _network("hidden", None, "hidden layer widths of the FC backbone", (None, IntegerSequence()), FC_HEADS,
             shown=_per_head("hidden"), cli={"nargs": "+", "metavar": "WIDTH"}),
    _network("dropout", None, "dropout after hidden layers", (Real(0, 1, "left"), None), shown=_per_head("dropout")),
    _network("linear_width", 0, "FC: width of a linear path of the input beside the hidden layers (0: none)",
             (NON_NEGATIVE,), ("hrr", "dense"), cli={"metavar": "WIDTH"}),
    _network("epochs", None, "training epochs", (POSITIVE, None), shown=_per_head("epochs")),
    _network("batch_size", None, "training batch size", (POSITIVE, None), shown=_per_head("batch_size")),
    _network("lr", None, "Adam learning rate", (Real(0, None, "neither"), None), shown=_per_head("lr")),
    _network("weight_decay", 0.0, "Adam weight decay", (Real(0),)),
    _network("sparse_updates", "auto", "compute Adam's steps only on the input-layer rows a batch reads (much faster "
             "for large D); auto: on where measured faster (CPU, one process, no weight decay, >= 15,000 features "
             "of which a batch reads <= 7.5%)", (Options((True, False, "auto")),)),
    _network("schedule", "cosine", "learning-rate schedule", (Options(("none", "cosine", "linear")),)),
    _network("warmup_epochs", 0.0, "epochs of linear learning-rate warm-up before the schedule", (Real(0),),
             cli={"metavar": "EPOCHS"}),
    _network("grad_clip", None, "clip the gradient norm to this value", (Real(0, None, "neither"), None),
             shown="no clipping", cli={"metavar": "NORM"}),
    _network("val_fraction", 0.1, "share of the training rows held out to choose the epoch (the linear model: C; "
             "head auto: the model)", (Real(0, 1, "left"),), ("auto", *NETWORK_HEADS, "linear")),
    _network("patience", None, "early-stopping patience in epochs", (POSITIVE, None), shown="no early stop"),
    _network("time_limit", None, "stop each network's training (each ensemble member, each SOLAR chunk) after the "
             "epoch that ends past this many seconds, keeping its best epoch", (Real(0), None), shown="none",
             cli={"metavar": "SECONDS"}),
    _network("abandon_below", None, "stop a network's training once its validation score can no longer reach this "
             "value (in percent: the best so far plus its recent gain carried over the epochs left at their learning "
             "rates, less the score's standard error); head auto gives a network candidate the leader's validation "
             "P@1", (Real(0, 100), None), ("hrr", "dense"), shown="never", cli={"metavar": "SCORE"}),
    _network("refit", False, "after choosing the epoch (the linear model: C) on the validation split, retrain on "
             "every training row", (BOOL,), ("hrr", "dense", "linear")),
    _network("precision", "float32", "bfloat16: mixed-precision training steps (autocast; weights and scoring stay "
             "float32)", (Options(("float32", "bfloat16")),)),
    Setting("duplicate_cosine", 0.9, "without groups, rows of near-identical features (cosine similarity at least "
            "this: one word changed in a 20-word TF-IDF row leaves about 0.9) are kept on one side of every validation "
            "split, as a group (None: off)", flag="--duplicate-cosine",
            allowed=(Real(0, 1, "right"), None), cli={"metavar": "COSINE"}),
    Setting("warm_start", False, "fit a fitted estimator again from its networks' weights (same features, labels "
            "and network settings) instead of a fresh initialisation; partial_fit trains one epoch so",
            ("hrr", "dense"), reason="scikit-learn's warm start of a fitted estimator; a killed run continues with "
            "--resume", allowed=(BOOL,)),
    Setting("n_models", 1, "train N networks from different seeds and rank labels by their mean score "
            "(N times the training time)", ("hrr", "dense"), flag="--n-models", allowed=(POSITIVE,),
            cli={"metavar": "N"}),
    # --- where and how
    Setting("seed", 0, "random seed (initialisation, codes, splits, order)", flag="--seed", allowed=(NON_NEGATIVE,)),
    Setting("random_state", None, "scikit-learn's name for seed (give one of them)",
            reason="scikit-learn's name for --seed", allowed=(NON_NEGATIVE, None)),
    Setting("device", "cpu", "cpu, cuda, cuda:1, ...", flag="--device", allowed=(Instance(str, "a device name"),)),
    Setting("workers", 1, "train SOLAR's chunks, the linear and re-rank models' label blocks, or an ensemble's "
            "networks in parallel local processes", flag="--workers", allowed=(POSITIVE,)),
    Setting("n_jobs", None, "scikit-learn's name for workers (-1: one per core)",
            reason="scikit-learn's name for --workers", allowed=(POSITIVE, Integer(-1, -1), None)),
    Setting("ray_address", None, "train each SOLAR chunk, label block or ensemble network as a Ray task on this "
            "cluster ('auto', an address, or 'local')", flag="--ray-address", shown="none (local processes)",
            allowed=(Instance(str, "an address"), None), cli={"metavar": "ADDRESS"}),
    Setting("propensity", DEFAULT_PROPENSITY, "(A, B) of the inverse propensities of PSP@k",
            reason="follows the data set's name on the command line (holoxmc.metrics.propensity_preset)",
            allowed=(RealPair(),)),
    Setting("progress", None, "a progress bar while fitting (None: only on a terminal)",
            reason="--quiet turns it off", allowed=(BOOL, None)),
    Setting("time_budget", 60.0, "head auto: candidates start only within this many seconds", ("auto",),
            flag="--time-budget", allowed=(Real(0),), cli={"metavar": "SECONDS"}),
    # --- head options: HRR
    Setting("loss", PerHead(hrr="cosine", xr="cosine", solar="auto"),
            "the training loss: HRR cosine (the paper's) or abs (the authors' variant); SOLAR auto (softmax from "
            "2,000 buckets a chunk, else full), full (the BCE over "
            "all B buckets) or sampled (each batch's positive buckets and --negatives shared random ones, "
            "reweighted to an unbiased estimate of the full loss) or softmax (a softmax over the buckets, its partition "
            "sum estimated on the sampled loss's buckets) or row-softmax (that softmax, each row against its own "
            "positive buckets and the drawn ones only)", ("hrr", "xr", "solar"), flag="--loss",
            head_option=True, allowed=(Options(("cosine", "abs", "full", "sampled", "softmax", "row-softmax", "auto")),)),
    Setting("ranking", 0.0, "HRR: weight of the label-ranking term (0: the paper's J_p + J_n alone)", ("hrr", "xr"),
            flag="--ranking", head_option=True, allowed=(Real(0),), cli={"metavar": "WEIGHT"}),
    Setting("learn_pm", False, "HRR: learn the roles p and m", ("hrr", "xr"), flag="--learn-pm", head_option=True,
            allowed=(BOOL,), cli={"action": "store_true"}),
    Setting("learn_labels", False, "HRR: learn the label vectors (the HRR paper's Table 5; with --label-code random)",
            ("hrr", "xr"), flag="--learn-labels", head_option=True, allowed=(BOOL,), cli={"action": "store_true"}),
    Setting("label_bias", False, "HRR: learn a bias per label in the ranking logits (needs --ranking > 0)",
            ("hrr", "xr"), flag="--label-bias", head_option=True, allowed=(BOOL,)),
    Setting("code", "random", "HRR: i.i.d. label vectors, or groups of d' circular shifts decoded by FFT",
            ("hrr", "xr"), flag="--label-code", head_option=True, allowed=(Options(("random", "circulant")),)),
    Setting("cache_codes", True, "HRR: keep the (L, 2d') label-key table in memory; --no-code-cache for millions of "
            "labels, best with --label-code circulant", ("hrr", "xr"), flag="--code-cache", head_option=True,
            allowed=(BOOL,)),
    # --- head options: SOLAR
    Setting("n_chunks", 8, "SOLAR: independent chunk models K", ("solar",), flag="--chunks", head_option=True,
            allowed=(POSITIVE,), cli={"metavar": "K"}),
    Setting("n_buckets", None, "SOLAR: buckets per chunk B", ("solar",), flag="--buckets", head_option=True,
            allowed=(POSITIVE, None), shown="ceil(L / 2), at most 20,000", cli={"metavar": "B"}),
    Setting("code_method", "balanced", "SOLAR: label-to-bucket codes with equal bucket loads (balanced) or the "
            "paper's hash (murmur)", ("solar",), flag="--code-method", head_option=True,
            allowed=(Options(("balanced", "murmur")),)),
    Setting("feature_dim", None, "SOLAR: hash each chunk's input to D features", ("solar",), flag="--feature-dim",
            head_option=True, allowed=(POSITIVE, None), shown="no hashing up to 2**17 features, else 2**17",
            cli={"metavar": "D"}),
    Setting("top_buckets", 10, "SOLAR: buckets each chunk retrieves", ("solar",), flag="--top-buckets",
            head_option=True, allowed=(POSITIVE,), cli={"metavar": "M"}),
    Setting("min_freq", None, "SOLAR: a label is a candidate when at least N of the K chunks retrieve it",
            ("solar",), flag="--min-freq", head_option=True, allowed=(POSITIVE, None), shown="K // 2",
            cli={"metavar": "N"}),
    Setting("min_freq_mode", "relaxed", "SOLAR: relaxed lowers --min-freq per point to its k-th best hit count when "
            "fewer than k labels would pass; strict is the paper's filter as it stands (a point may get fewer than k "
            "labels; --min-freq at most K)", ("solar",), flag="--min-freq-mode", head_option=True,
            allowed=(Options(("relaxed", "strict")),)),
    Setting("negatives", 1024, "SOLAR: buckets the sampled loss draws per batch (at least B: all, the full loss)",
            ("solar",), flag="--negatives", head_option=True, allowed=(POSITIVE,), cli={"metavar": "S"}),
    Setting("prior_bias", True, "SOLAR: start each bucket's output bias at the log-odds of its share of the "
            "training rows", ("solar",), flag="--prior-bias", head_option=True, allowed=(BOOL,)),
    Setting("scoring", "prob", "SOLAR: a candidate's score, summed over the K chunks: its bucket's probability, its "
            "log, or the logit", ("solar",), flag="--scoring", head_option=True,
            allowed=(Options(("prob", "logprob", "logit")),)),
    # --- head options: linear and re-rank
    Setting("C", None, "linear: every label's SVM regularisation", ("linear",), flag="--C", head_option=True,
            allowed=(Real(0, None, "neither"), None),
            shown="chosen on the validation split from " + ", ".join(map(str, LINEAR_C_GRID)), cli={"metavar": "C"}),
    Setting("shortlist", None, "rerank: labels the retriever proposes per point", ("rerank",), flag="--shortlist",
            head_option=True, allowed=(POSITIVE, None), cli={"metavar": "S"},
            shown=f"{RERANK_SHORTLIST['per_row']} x the mean labels of a training point, within "
                  f"{RERANK_SHORTLIST['floor']}-{RERANK_SHORTLIST['cap']}"),
    Setting("train_shortlist", None, "rerank: the best labels of a training point's shortlist that train as hard "
            "negatives", ("rerank",), flag="--train-shortlist", head_option=True, allowed=(POSITIVE, None),
            shown="the shortlist, cut to 100M entries over the training points", cli={"metavar": "S"}),
    Setting("label_weights", None, "rerank: the most weights a label keeps, its largest", ("rerank",),
            flag="--label-weights", head_option=True, allowed=(POSITIVE, None), shown="500M / L",
            cli={"metavar": "W"}),
    Setting("frequent_labels", None, "rerank: the most frequent training labels on every shortlist, in training "
            "and prediction (0: none)", ("rerank",), flag="--frequent-labels", head_option=True,
            allowed=(NON_NEGATIVE, None), shown="those more often right than a shortlist entry", cli={"metavar": "F"}),
)

#: Every setting by name.
SETTING: Mapping[str, Setting] = MappingProxyType({s.name: s for s in SETTINGS})
#: The ``XMCClassifier`` keywords' defaults (its signature reads them from here).
DEFAULTS: Mapping[str, Any] = MappingProxyType({s.name: s.default for s in SETTINGS if not s.head_option})
#: Every ``XMCClassifier`` keyword and the forms it may take, checked at once at ``fit``
#: (before the data); the head name is checked against the model registry, and which settings
#: apply to a head there too. Floats are finite throughout.
ESTIMATOR_CONSTRAINTS: Mapping[str, list[Constraint | None]] = MappingProxyType(
    {s.name: list(s.allowed) for s in SETTINGS if not s.head_option})
#: The ``XMCClassifier`` keywords that some heads only take (the ``heads`` of their rows): each
#: head's family takes those the table gives it (:data:`holoxmc.models.registry.FAMILIES`),
#: and a value other than the default for a head that does not take it is refused, never ignored.
HEAD_SETTINGS: tuple[str, ...] = tuple(s.name for s in SETTINGS if not s.head_option and set(s.heads) != set(ALL_HEADS))
#: How a message names a setting, where its keyword alone says too little.
SETTING_NAMES = {"dim": "dim (the HRR dimension d')"}
#: Per head kind: ``holoxmc train`` option destination → ``head_options`` key.
HEAD_OPTIONS: Mapping[str, dict[str, str]] = MappingProxyType({
    owner: {s.dest: s.name for s in SETTINGS if s.head_option and owner in s.heads} for owner in OPTION_OWNERS})


def heads_taking(name: str) -> tuple[str, ...]:
    """The head kinds that take setting ``name`` (every head for a name the table does not hold).

    Example:
        >>> heads_taking("dim"), heads_taking("n_models")
        (('hrr', 'xr'), ('hrr', 'dense'))
    """
    return SETTING[name].heads if name in SETTING else ALL_HEADS


def for_head(head: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``XMCClassifier`` keywords of ``params`` that ``head`` takes (:func:`heads_taking`):
    one set of settings shared by several heads, cut for one of them.

    Example:
        >>> for_head("dense", {"dim": 64, "hidden": (8,), "seed": 1})
        {'hidden': (8,), 'seed': 1}
        >>> sorted(for_head("linear", {"dim": 64, "epochs": 2, "refit": True}))
        ['refit']
    """
    return {name: value for name, value in params.items() if head in heads_taking(name)}


def untaken_defaults(head: Any) -> dict[str, Any]:
    """The defaults of the :data:`HEAD_SETTINGS` that ``head`` does not take: what a candidate
    of ``head="auto"`` gets for them, and a saved model of ``head`` (a value there never
    changed the model; ``head="auto"`` saves its winner with its own ``time_budget``).

    Example:
        >>> untaken_defaults("linear")["dim"], "refit" in untaken_defaults("linear")
        (400, False)
    """
    return {name: DEFAULTS[name] for name in HEAD_SETTINGS if head not in heads_taking(name)}


def option_default(head: str, name: str) -> Any:
    """The default of head option ``name`` of ``head`` (what its configuration starts from).

    Raises:
        KeyError: no such head option.

    Example:
        >>> option_default("solar", "top_buckets")
        10
    """
    setting = SETTING[name]
    if not setting.head_option or head not in setting.heads:
        raise KeyError(f"{name!r} is no head option of {head!r}")
    return setting.default[head] if isinstance(setting.default, PerHead) else setting.default


def default_text(setting: Setting) -> str:
    """The default as ``--help`` states it.

    Example:
        >>> default_text(SETTING["schedule"]), default_text(SETTING["n_buckets"])
        ('cosine', 'ceil(L / 2), at most 20,000')
    """
    if setting.shown is not None:
        return setting.shown
    value = setting.default
    if isinstance(value, PerHead):
        return repr(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
