"""Distribution: independent jobs (SOLAR chunks, an ensemble's networks) in local worker
processes or as Ray tasks (:mod:`holoxmc.distributed.jobs`), and data-parallel training of
one network over torch.distributed (:mod:`holoxmc.distributed.data_parallel`)."""

from holoxmc.distributed.jobs import JobFailure, JobsFailed, run_jobs, scratch_folder, threads_per_worker

__all__ = ["run_jobs", "scratch_folder", "threads_per_worker", "JobsFailed", "JobFailure"]
