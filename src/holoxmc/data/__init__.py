"""Data layer: readers of the XMC formats, the dataset registry, the synthetic generator,
text featurizers, the ``.npz`` cache, sharded CSR stores read a shard at a time and the mini-batch types handed to models."""

from holoxmc.data.cache import load_npz, save_npz
from holoxmc.data.dataset import Dataset, DatasetStats
from holoxmc.data.readers import (
    read_jsonl,
    read_mat,
    read_split_indices,
    read_svmlight,
    read_xml_repo,
    read_xml_repo_split,
    write_xml_repo,
)
from holoxmc.data.registry import (
    REGISTRY, DatasetInfo, StatisticsWarning, download, fetch, find_dataset_dir, load, load_text_pair, text_split_file,
)
from holoxmc.data.realistic import make_realistic
from holoxmc.data.shards import ShardedRows, ShardStore, open_shards, write_shards
from holoxmc.data.synthetic import SYNTHETIC_PRESETS, make_synthetic
from holoxmc.data.text import TextEncoder, Tokenizer, fit_tfidf

__all__ = [
    "Dataset",
    "DatasetStats",
    "DatasetInfo",
    "REGISTRY",
    "StatisticsWarning",
    "load",
    "fetch",
    "download",
    "find_dataset_dir",
    "text_split_file",
    "load_text_pair",
    "make_synthetic",
    "make_realistic",
    "SYNTHETIC_PRESETS",
    "read_xml_repo",
    "read_xml_repo_split",
    "read_split_indices",
    "read_svmlight",
    "read_mat",
    "read_jsonl",
    "write_xml_repo",
    "Tokenizer",
    "TextEncoder",
    "fit_tfidf",
    "save_npz",
    "load_npz",
    "write_shards",
    "open_shards",
    "ShardStore",
    "ShardedRows",
]
