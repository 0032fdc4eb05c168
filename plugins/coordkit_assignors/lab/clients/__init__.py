"""``real-clients``: consumer groups of real client processes on ``coordkit serve``.

* :mod:`~coordkit_assignors.lab.clients.workload`: the workload, its strategies
  (client library x assignor) and its metrics;
* :mod:`~coordkit_assignors.lab.clients.run`: one run's processes and events;
* :mod:`~coordkit_assignors.lab.clients.analysis`: the processes' logs → steps;
* :mod:`~coordkit_assignors.lab.clients.broker_host`, :mod:`~.consumer`, :mod:`~.producer`: the
  programs those processes run.
"""
