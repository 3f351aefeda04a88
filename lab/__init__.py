"""The lab: experiments on the method, beside the product and never imported by it.

`trainer/` holds the adopted recipe, `sdk/` and `export/` the product. What measures the method rather than
being part of it lives here: the per-task fine-tuning oracle, the stage-2 diagnostics, and the one-off
drivers behind docs/results/experiments.md. A lever becomes trainer code only when a preset adopts it;
the dead-end levers were removed from the trainer and reproduce from git tag `lab-levers-2026-11`
(trainer.config.REMOVED_LEVERS). `python -m lab --help` lists the commands.
"""
