"""gunicorn settings for the control plane's web process (``gunicorn -c deploy/gunicorn.conf.py fleet.wsgi``).

Every setting can be overridden from the environment: ``GUNICORN_BIND``, ``GUNICORN_WORKERS``, ``GUNICORN_TIMEOUT``.
"""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", str(min(4, multiprocessing.cpu_count() * 2))))
threads = 2
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 10
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = "127.0.0.1"
