"""The Celery app of the control plane, on Redis (REDIS_URL); its settings are the ``CELERY_*`` ones in
``fleet/settings.py`` and its tasks are in ``fleet/core/tasks.py``.

Run it as ``celery -A fleet worker -Q fleet`` (the control plane's tasks) and ``celery -A fleet beat`` (the
reconcile and history schedule); see ``deploy/systemd/``.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fleet.settings")
app = Celery("fleet")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
