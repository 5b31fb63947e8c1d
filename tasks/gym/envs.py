"""Building one task's env from its Gymnasium id and kwargs, with one-line errors for what a user can fix."""
from __future__ import annotations

from typing import Any

import gymnasium

from ad.errors import UserError


def make_env(env_id: str, kwargs: dict[str, Any], where: str = "") -> gymnasium.Env:
    """``gymnasium.make(env_id, **kwargs)``; an unknown id, a missing package or kwargs the env rejects become a
    UserError that says what to do (``where`` names the task in the message)."""
    at = f" ({where})" if where else ""
    try:
        return gymnasium.make(env_id, **kwargs)
    except gymnasium.error.DependencyNotInstalled as err:
        raise UserError(f"env {env_id}{at} needs a package that is not installed: {_line(err)}") from None
    except (gymnasium.error.NameNotFound, gymnasium.error.NamespaceNotFound, gymnasium.error.VersionNotFound,
            gymnasium.error.UnregisteredEnv, gymnasium.error.DeprecatedEnv) as err:
        raise UserError(f"--env {env_id}: {_line(err)}") from None
    except ModuleNotFoundError as err:
        raise UserError(f"env {env_id}{at} needs the package {err.name!r}, which is not installed: "
                        f"pip install {err.name}") from None
    except (TypeError, ValueError, AssertionError) as err:
        raise UserError(f"env {env_id} rejects the kwargs {kwargs}{at}: {_line(err) or type(err).__name__}; "
                        "fix them in the --tasks file") from None


def check_same_spaces(env: gymnasium.Env, first: gymnasium.Env, where: str) -> None:
    """Every task of a dataset must share the first task's spaces (one history spec per dataset)."""
    if env.observation_space != first.observation_space or env.action_space != first.action_space:
        raise UserError(f"{where} has spaces {env.observation_space} / {env.action_space}, the first task "
                        f"{first.observation_space} / {first.action_space}; a dataset's tasks must share their spaces")


def _line(err: BaseException) -> str:
    return " ".join(str(err).split())
