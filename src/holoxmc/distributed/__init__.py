"""Independent jobs (SOLAR chunks) in local worker processes or as Ray tasks."""

from holoxmc.distributed.jobs import JobFailure, JobsFailed, run_jobs

__all__ = ["run_jobs", "JobsFailed", "JobFailure"]
