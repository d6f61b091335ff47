"""Training: the shared trainer, checkpoints and batched inference."""

from holoxmc.train.checkpoint import load_checkpoint, load_state_dict_file, save_checkpoint, save_state_dict
from holoxmc.train.inference import evaluate_topk, labels_above, predict_above, predict_topk
from holoxmc.train.trainer import REFIT_DIR, FitResult, TrainConfig, Trainer, lr_factor, split_validation

__all__ = [
    "Trainer",
    "TrainConfig",
    "REFIT_DIR",
    "FitResult",
    "split_validation",
    "lr_factor",
    "predict_topk",
    "predict_above",
    "labels_above",
    "evaluate_topk",
    "save_checkpoint",
    "load_checkpoint",
    "save_state_dict",
    "load_state_dict_file",
]
