"""hookgrad's built-in plugins: each is a plugin like any third-party one.

Every built-in is registered as an entry point of the ``hookgrad.plugins`` group in hookgrad's
own ``pyproject.toml`` and activated by a ``[plugins.NAME]`` table; nothing here is imported by
``import hookgrad``. At the optimizer step they run in one pipeline order, fixed by
:class:`hookgrad.hookspecs.Stage`: unscale (``grad_scale``) -> guard (``nan_guard``) ->
pre-clip statistics (``grad_stats``) -> clip (``grad_clip``) -> step or skip, and post-clip
statistics after the step.
"""
