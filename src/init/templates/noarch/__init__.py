"""{{name}}: {{summary}}"""

from .op import {{python_name}}

__all__ = ["{{python_name}}"]
