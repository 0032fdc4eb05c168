"""The assignors' lab workloads and metrics (the family's own, as every strategy family keeps its
workloads: see :mod:`coordkit.lab` for the contract and the README's "Adding workloads and metrics").

* :mod:`~coordkit_assignors.lab.events`: what happens to a group (members join, leave, crash;
  topics appear, grow, vanish; subscriptions change);
* :mod:`~coordkit_assignors.lab.simulation`: a group living through events, one rebalance per
  event (eager or cooperative), and :class:`~coordkit_assignors.lab.simulation.AssignmentWorkload`,
  the base class of assignment workloads;
* :mod:`~coordkit_assignors.lab.workloads` and :mod:`~coordkit_assignors.lab.metrics`: the
  built-in assignment workloads (``kafka-grid``, ``zipf-load``, ``churn``, ...) and their metrics;
* :mod:`~coordkit_assignors.lab.groups`: ``consumer-groups``, real groups on an in-process
  cluster (the engine), one assignor each run;
* :mod:`~coordkit_assignors.lab.clients`: ``real-clients``, a group of real client processes
  (kafka-python, aiokafka, confluent-kafka) on ``coordkit serve``, one client x assignor each run;
* :mod:`~coordkit_assignors.lab.study`: ``study``, a given group and its events (a study file's,
  or a legacy group read from a store), carried in the scenario as JSON.
"""
