"""tasks domain.

Loading any part of it registers the task claim's lease hooks (claims.py, leases/hooks.py): a lapsed
claim is released with its consequences by the sweep of every process that reads tasks — the server,
`wait --for work` (which imports only queue.py), the dashboard — as when leases imported tasks.
"""

from . import claims as claims  # registers the hooks when the package loads
