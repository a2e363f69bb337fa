"""State tracking and accumulation: synthetic sequence tasks with a label at every position, trained at short
lengths on every registered backbone and scored at longer ones (issue 13; DESIGN §6's seed-study figures).

Modules, one job each: ``tasks`` (the task generators and labelling rules), ``model`` (token embedding ->
backbone -> per-position classifier), ``train`` (train and score one model), ``runner`` (the resumable grid),
``report`` (tables, plots, comparison), ``cli`` (``tsfm tasks run|report`` and
``python -m tsfm.pipelines.state_tracking``). Nothing here is imported by the forecasting core.
"""
