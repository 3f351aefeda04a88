"""TAPER trainer: ResNet-18 family, data and tasks, training stages, evaluation."""
