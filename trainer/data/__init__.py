"""Data sets (Tiny ImageNet, ImageFolder, synthetic), the decoded cache, hierarchy and task sampling."""

from .cache import DecodedDataset, Split, load_dataset
from .errors import DataError
from .hierarchy import ClassHierarchy
from .synthetic import make_synthetic_dataset
from .tasks import TaskSampler

__all__ = ["ClassHierarchy", "DataError", "DecodedDataset", "Split", "TaskSampler", "load_dataset",
           "make_synthetic_dataset"]
