"""The ``/v1`` routes, one ``APIRouter`` per resource, each built from the ``ApiContext``
(``context.py``) by its module's ``router(ctx)``; ``server/app.py``'s ``create_app`` includes
them in a fixed order (the order of ``/openapi.json``'s paths).

- ``status``: ``/healthz``, ``/metrics``, the version and the server's status
- ``jobs``: submit, list, describe, cancel, delete, events and logs of jobs (the exec
  WebSocket is ``server/podexec.py``)
- ``ray``: a Ray job's dashboard and job-submission API, proxied behind the caller's token
- ``cluster``: queues and nodes (cordon, drain)
- ``pools``: node pools bought for pending gangs
- ``configuration``: applying, reading and deleting the queue configuration
- ``planes``: compute planes, their workers' routes and the admins' registry
- ``identity``: tokens, users, API keys, teams and the audit log
- ``admission``: the mutating admission webhook of Kubernetes-native admission (open, and
  outside ``/v1``)
"""
