"""What a resolution may take (`TaskOptions`, checked on creation) and what it gives (`Task`), with the limits
every rule shares."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sdk.errors import DescriptionError

MAX_DESCRIPTION_CHARS = 1000
MAX_CLASS_LIST = 10_000
MAX_GROUP_CLASSES = 100  # a named group is taken whole (max_classes does not cut it), up to this many
MAX_TASK_CLASSES = 100_000
MISSING = "not a name this bundle knows"   # rule 4a's words in a resolution (the Java core's too)
# rule 3's relation, for a group name only WordNet-derived concepts give (sdk.format.bundle.DERIVED_CONCEPT_PREFIX)
DERIVED = "from WordNet: a kind of thing each of its classes is"
MISSING_POLICIES = ("tell", "nearest")


@dataclass(frozen=True)
class TaskOptions:
    """How a description becomes a task (see the module docstring). Checked on creation: a wrong type,
    a NaN or a value out of range raises DescriptionError.

    Args:
        max_classes: most classes taken from free text (1 to 100,000; a named group is taken whole).
        min_classes: fewest classes in a task (1 to max_classes); nearest classes pad it. The default, 1, pads
            nothing: the model of one class answers it or "anything else" (`sdk.engines.rest`).
        margin: free text takes the classes within this of the best similarity, and a class named alone
            its look-alikes, the classes within this of its own name's embedding (0 to 2).
        min_contrast: the best class must stand out from the mean similarity by this much (0 to 2).
        missing: what an item the bundle lacks gets (rule 4a): "tell" (default) nothing, only the closest
            names in the resolution; "nearest" its nearest classes by text similarity, as before issue 60.
    """
    max_classes: int = 20
    min_classes: int = 1   # was 2 (a padded class) before docs/results/one_class.json
    margin: float = 0.08
    min_contrast: float = 0.13   # best similarity minus the mean over all classes; below: nothing matches
    missing: str = "tell"        # rule 4a: "tell" takes nothing for an item the bundle lacks; "nearest" its nearest

    def __post_init__(self) -> None:
        if self.missing not in MISSING_POLICIES:
            raise DescriptionError(f"missing must be one of {MISSING_POLICIES}, got {self.missing!r}")
        for name in ("max_classes", "min_classes"):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= MAX_TASK_CLASSES:
                raise DescriptionError(f"{name} must be an integer from 1 to {MAX_TASK_CLASSES}, got {value!r}")
        if self.min_classes > self.max_classes:
            raise DescriptionError(f"min_classes ({self.min_classes}) is larger than max_classes ({self.max_classes})")
        for name in ("margin", "min_contrast"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or not 0 <= value <= 2:
                raise DescriptionError(f"{name} must be a number from 0 to 2 (cosine similarities), got {value!r}")


@dataclass
class Task:
    classes: np.ndarray           # sorted class indices
    embedding: np.ndarray         # [dim], unit length
    how: list[str] = field(default_factory=list)  # how each part of the description was resolved
    encode_ms: float = 0.0        # time spent embedding text (part of resolving)
