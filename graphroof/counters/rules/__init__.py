"""Built-in rules.  Each module registers its rules with ``@register_rule`` on import."""

from . import table  # noqa: F401
from . import comm  # noqa: F401
from . import kvcache  # noqa: F401
