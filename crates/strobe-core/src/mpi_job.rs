//! Which MPI job, if any, a process belongs to, from its launcher's
//! environment variables.
//!
//! Owns reading the variables Open MPI, PMIx, MPICH's Hydra, MVAPICH and
//! Slurm set for each rank (rank, world size, job id) into one [`MpiJob`],
//! and the `strobe_settings` rows that record it. It never talks to a
//! launcher or to MPI: a process started some other way simply has no job.

use std::collections::HashMap;

/// One rank's place in an MPI job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiJob {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u32,
    /// Ranks in the job (0 when the launcher does not say).
    pub world_size: u32,
    /// The launcher's job id: equal for every rank of one job.
    pub job: String,
    /// `openmpi`, `pmix`, `pmi` (MPICH's Hydra and other PMI launchers),
    /// `mvapich`, `slurm` or `strobe` (`STROBE_RANK`).
    pub launcher: &'static str,
}

impl MpiJob {
    /// The job the calling process's environment describes.
    pub fn current() -> Option<MpiJob> {
        let env: HashMap<String, String> = std::env::vars().collect();
        // SAFETY: getppid has no preconditions and cannot fail.
        let ppid = unsafe { libc::getppid() } as u32;
        MpiJob::from_env(&env, ppid)
    }

    /// The job `env` describes; `ppid` names a Hydra job (which exports
    /// no job id) by the proxy that started the rank.
    pub fn from_env(env: &HashMap<String, String>, ppid: u32) -> Option<MpiJob> {
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let num = |k: &str| get(k).and_then(|v| v.parse::<u32>().ok());
        let host = || get("HOSTNAME").map_or_else(crate::output_path::hostname, str::to_string);
        if let Some(rank) = num("OMPI_COMM_WORLD_RANK") {
            let job = get("OMPI_MCA_ess_base_jobid")
                .or_else(|| get("PMIX_NAMESPACE"))
                .map(str::to_string)
                .unwrap_or_else(|| format!("openmpi-{}", host()));
            return Some(MpiJob {
                rank,
                world_size: num("OMPI_COMM_WORLD_SIZE").unwrap_or(0),
                job,
                launcher: "openmpi",
            });
        }
        if let (Some(rank), Some(ns)) = (num("PMIX_RANK"), get("PMIX_NAMESPACE")) {
            return Some(MpiJob {
                rank,
                world_size: num("PMIX_SIZE")
                    .or_else(|| num("SLURM_NTASKS"))
                    .unwrap_or(0),
                job: ns.to_string(),
                launcher: "pmix",
            });
        }
        if let Some(rank) = num("MV2_COMM_WORLD_RANK") {
            return Some(MpiJob {
                rank,
                world_size: num("MV2_COMM_WORLD_SIZE").unwrap_or(0),
                job: get("MPIRUN_ID")
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("mvapich-{}-{ppid}", host())),
                launcher: "mvapich",
            });
        }
        if let Some(rank) = num("PMI_RANK") {
            let job = get("PMI_KVSNAME")
                .or_else(|| get("PMI_JOBID"))
                .map(str::to_string)
                .or_else(|| slurm_job(&get))
                .unwrap_or_else(|| format!("hydra-{}-{ppid}", host()));
            return Some(MpiJob {
                rank,
                world_size: num("PMI_SIZE").unwrap_or(0),
                job,
                launcher: "pmi",
            });
        }
        if let (Some(rank), Some(job)) = (num("SLURM_PROCID"), slurm_job(&get)) {
            return Some(MpiJob {
                rank,
                world_size: num("SLURM_NTASKS").unwrap_or(0),
                job,
                launcher: "slurm",
            });
        }
        num("STROBE_RANK").map(|rank| MpiJob {
            rank,
            world_size: num("STROBE_WORLD_SIZE").unwrap_or(0),
            job: get("STROBE_JOB").unwrap_or("strobe").to_string(),
            launcher: "strobe",
        })
    }

    /// The `strobe_settings` rows recording the job.
    pub fn settings(&self) -> Vec<(String, String)> {
        vec![
            ("mpi.rank".into(), self.rank.to_string()),
            ("mpi.world_size".into(), self.world_size.to_string()),
            ("mpi.job".into(), self.job.clone()),
            ("mpi.launcher".into(), self.launcher.into()),
        ]
    }
}

/// Slurm's `JOBID.STEPID`.
fn slurm_job<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    let job = get("SLURM_JOB_ID").or_else(|| get("SLURM_JOBID"))?;
    Some(match get("SLURM_STEP_ID").or_else(|| get("SLURM_STEPID")) {
        Some(step) => format!("{job}.{step}"),
        None => job.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn open_mpi_ranks_of_one_job_share_its_id() {
        let a = MpiJob::from_env(
            &env(&[
                ("OMPI_COMM_WORLD_RANK", "2"),
                ("OMPI_COMM_WORLD_SIZE", "4"),
                ("OMPI_MCA_ess_base_jobid", "412876801"),
                ("PMIX_RANK", "2"),
                ("PMIX_NAMESPACE", "412876801"),
            ]),
            10,
        )
        .unwrap();
        assert_eq!((a.rank, a.world_size, a.launcher), (2, 4, "openmpi"));
        assert_eq!(a.job, "412876801");
    }

    #[test]
    fn hydra_and_slurm_and_none() {
        let h = MpiJob::from_env(
            &env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("HOSTNAME", "n1")]),
            77,
        )
        .unwrap();
        assert_eq!(
            (h.rank, h.world_size, h.job.as_str()),
            (1, 2, "hydra-n1-77")
        );
        let s = MpiJob::from_env(
            &env(&[
                ("SLURM_PROCID", "5"),
                ("SLURM_NTASKS", "8"),
                ("SLURM_JOB_ID", "99"),
                ("SLURM_STEP_ID", "0"),
            ]),
            1,
        )
        .unwrap();
        assert_eq!((s.rank, s.world_size, s.job.as_str()), (5, 8, "99.0"));
        assert_eq!(s.launcher, "slurm");
        assert!(MpiJob::from_env(&env(&[("PMI_SIZE", "2")]), 1).is_none());
        assert!(MpiJob::from_env(&env(&[("OMPI_COMM_WORLD_RANK", "x")]), 1).is_none());
    }
}
