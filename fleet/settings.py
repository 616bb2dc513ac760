"""Django settings, read from the environment (see README.md)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = os.environ.get("DJANGO_DEBUG", "").lower() in ("1", "true", "yes", "on")
# Without SECRET_KEY (and DEBUG off) the key stays empty: commands and tests that sign nothing run, and Django
# refuses anything that needs the key (sessions, CSRF tokens, password resets) with ImproperlyConfigured.
SECRET_KEY = os.environ.get("SECRET_KEY") or ("dev-insecure-secret-key-set-SECRET_KEY" if DEBUG else "")
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",") if h.strip()]
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def database_from_url(url: str) -> dict[str, str]:
    """A Django DATABASES entry from a URL: ``sqlite:///relative/path`` (from the repository root),
    ``sqlite:////absolute/path``, ``sqlite://:memory:``, ``postgres://user:pass@host:port/name`` or ``mysql://...``;
    ValueError for anything else."""
    scheme, _, rest = url.partition("://")
    if scheme == "sqlite":
        name = unquote(rest.removeprefix("/"))
        if not name:
            raise ValueError("DATABASE_URL: a sqlite URL needs a path, as in sqlite:///var/fleet.sqlite3")
        if name != ":memory:" and not Path(name).is_absolute():
            name = str(BASE_DIR / name)
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name}
    engines = {
        "postgres": "django.db.backends.postgresql",
        "postgresql": "django.db.backends.postgresql",
        "mysql": "django.db.backends.mysql",
    }
    if scheme not in engines:
        raise ValueError(f"DATABASE_URL: unsupported scheme {scheme!r} (use sqlite, postgres or mysql)")
    parsed = urlparse(url)
    name = unquote(parsed.path.lstrip("/"))
    if not name:
        raise ValueError(f"DATABASE_URL: no database name in {scheme}://...")
    return {
        "ENGINE": engines[scheme],
        "NAME": name,
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
    }


DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL", "sqlite:///var/fleet.sqlite3"))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes write (gunicorn, the Celery worker): a transaction takes the write lock when it begins (a
    # deferred one failing to upgrade its lock gets "database is locked" at once), writers wait up to 20 s for each
    # other, and readers never wait for writers (WAL).
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL;",
    }

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "fleet.core",
    "fleet.web",
    "fleet.failover",
    "django_celery_beat",
    "fleet.bench",
    "axes",
    "csp",
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:overview"
LOGOUT_REDIRECT_URL = "login"

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "fleet.core.audit.AuditSourceMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out login with 429
]

# Content-Security-Policy: the pages load only this site's scripts, styles and images (htmx, Chart.js and the
# API docs are static files; no inline script anywhere, the API docs' setup script included), and no site may
# frame them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Logins are throttled (fleet/core/logins.py): a username is locked out from one client address after
# AXES_FAILURE_LIMIT failed logins (web form or API token) for AXES_COOLOFF_TIME hours; a success resets the count.
AUTHENTICATION_BACKENDS = ["fleet.core.logins.LoginThrottle", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("FLEET_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("FLEET_LOGIN_COOLOFF_HOURS", "0.25"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False

# Behind TLS (FLEET_TLS=1, the deployment in deploy/): cookies only over HTTPS, HSTS, sessions of 8 hours.
if os.environ.get("FLEET_TLS", "").lower() in ("1", "true", "yes", "on"):
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("FLEET_HSTS_SECONDS", "31536000"))
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The keys that seal MySQL passwords in the database (fleet.core.sealing): the key itself, or a file kept outside it.
FLEET_SEALING_KEY = os.environ.get("FLEET_SEALING_KEY", "")
FLEET_SEALING_KEY_FILE = os.environ.get("FLEET_SEALING_KEY_FILE") or str(VAR_DIR / "sealing.key")
# The key that signs every config sent to a node (fleet.core.signing): the key itself, or a file kept outside the
# database; nodes get its public half (manage.py signing-public-key).
FLEET_SIGNING_KEY = os.environ.get("FLEET_SIGNING_KEY", "")
FLEET_SIGNING_KEY_FILE = os.environ.get("FLEET_SIGNING_KEY_FILE") or str(VAR_DIR / "signing.key")
# API tokens are valid this many days from when they were made (fleet/api/tokens.py).
FLEET_TOKEN_DAYS = float(os.environ.get("FLEET_TOKEN_DAYS", "30"))
SESSION_COOKIE_AGE = int(os.environ.get("FLEET_SESSION_SECONDS", str(8 * 3600)))
SESSION_COOKIE_HTTPONLY = CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

ROOT_URLCONF = "fleet.urls"
WSGI_APPLICATION = "fleet.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Every process logs to stderr (journald under systemd, the terminal under `make run`), server errors with their
# tracebacks; LOG_LEVEL (default INFO) sets the threshold.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# The REST API (fleet/api): token or session auth, roles from fleet.core.roles, paginated, filterable.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "fleet.api.tokens.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["fleet.api.permissions.RolePermission"],
    # JSON read as the nodes read it: a key twice in one object, or nesting too deep, is a 400 (fleet.api.parsers).
    "DEFAULT_PARSER_CLASSES": [
        "fleet.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "fleet.api.pagination.Pagination",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ProxyFleet API",
    "DESCRIPTION": "The control plane of a ProxyFleet proxy fleet (see docs/control-plane.md).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["fleet.api.permissions.ViewerPermission"],  # the schema and its docs behind a login
    "SWAGGER_UI_DIST": "SIDECAR",  # served from static files, no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Failover events' kind and state share their field names with row changes' kind and nodes' state.
    "ENUM_NAME_OVERRIDES": {
        "FailoverEventKindEnum": "fleet.failover.models.Event.Kind",
        "FailoverEventStateEnum": "fleet.failover.models.Event.State",
    },
}

# Celery (docs/control-plane.md, "Push protocol"): queue "fleet" for the control plane's tasks, "node.<name>" per
# proxy node (consumed by that node's agent), "bench" reserved for benchmark jobs (their own worker).
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_IGNORE_RESULT = True  # acks and reports are fire-and-forget; nothing waits for a result
CELERY_TASK_DEFAULT_QUEUE = "fleet"
CELERY_TASK_ROUTES = {"proxyfleet.fleet.*": {"queue": "fleet"}, "proxyfleet.bench.*": {"queue": "bench"}}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # every task is idempotent, so a message a dead worker held runs again
CELERY_TASK_TIME_LIMIT = 300
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Redis redelivers a message not acknowledged within the visibility timeout: far above any task's duration.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Seconds between reconciles (beat); every message a beat sends expires after one period, so a stopped worker
# does not come back to a backlog of them.
FLEET_RECONCILE_SECONDS = float(os.environ.get("FLEET_RECONCILE_SECONDS", "10"))
# Seconds after which a silent worker or beat shows as not running on the overview.
FLEET_SERVICE_SILENT_SECONDS = float(os.environ.get("FLEET_SERVICE_SILENT_SECONDS", "30"))
# Seconds between failover evaluations (beat): how soon a primary a majority of nodes reports dead is failed over.
FAILOVER_EVALUATE_SECONDS = float(os.environ.get("FAILOVER_EVALUATE_SECONDS", "1"))
# Beat keeps its schedule in the database (django-celery-beat): the fixed entries below plus each benchmark job's
# crontab (fleet/bench); benchmark runs go to the queue "bench" and end within BENCH_MAX_RUN_SECONDS (below Redis's
# visibility timeout, so a run is never delivered twice while it runs).
CELERY_BEAT_SCHEDULER = "fleet.bench.beat:Scheduler"
BENCH_MAX_RUN_SECONDS = float(os.environ.get("BENCH_MAX_RUN_SECONDS", "1800"))
CELERY_BEAT_SCHEDULE = {
    "reconcile": {
        "task": "proxyfleet.fleet.reconcile",
        "schedule": FLEET_RECONCILE_SECONDS,
        "options": {"queue": "fleet", "expires": FLEET_RECONCILE_SECONDS},
    },
    "compact-history": {
        "task": "proxyfleet.fleet.compact_history",
        "schedule": 60.0,
        "options": {"queue": "fleet", "expires": 60.0},
    },
    # Failover (fleet/failover): every primary checked against the nodes' reports, fences and first writes.
    "failover-evaluate": {
        "task": "proxyfleet.fleet.failover_evaluate",
        "schedule": FAILOVER_EVALUATE_SECONDS,
        "options": {"queue": "fleet", "expires": FAILOVER_EVALUATE_SECONDS},
    },
    "failover-prune": {
        "task": "proxyfleet.fleet.failover_prune",
        "schedule": 3600.0,
        "options": {"queue": "fleet", "expires": 3600.0},
    },
}
