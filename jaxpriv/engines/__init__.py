"""The engines that test a relation: sweep, search, the settings engine for claims about an
estimator, certificates, and the run state (checkpoints, run directories, process groups)
they share."""
