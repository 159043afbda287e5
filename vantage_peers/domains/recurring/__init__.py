"""Recurring task templates: cron schedules that create tasks, fired once across every process."""

from .overview import doctor_lines, scheduler_overview

__all__ = ["doctor_lines", "scheduler_overview"]
