"""The keys Slurm knows, as Slurm spells them, so that any spelling can be read and written back.

The three lists are the option tables of Slurm's own reader, ``src/common/read_config.c``
(SchedMD/slurm at 284c3b95): ``slurm_conf_options[]`` for the whole file, ``_nodename_options``
for a ``NodeName=`` line and ``_partition_options`` for a ``PartitionName=`` line. slurm.conf(5)
says keys are case-insensitive; :func:`canonical` maps any spelling to Slurm's.

Example:
    >>> canonical("priorityweightfairshare", GLOBAL), canonical("Nodes", PARTITION)
    ('PriorityWeightFairshare', 'Nodes')
    >>> canonical("CacheGroups", GLOBAL) is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["GLOBAL", "GLOBAL_KEYS", "NODE", "NODE_KEYS", "PARTITION", "PARTITION_KEYS",
           "SCHEDULER_PARAMETERS", "canonical"]

GLOBAL_KEYS: tuple[str, ...] = (  # slurm_conf_options[]
    "AccountingStorageBackupHost", "AccountingStorageEnforce", "AccountingStorageExternalHost",
    "AccountingStorageHost", "AccountingStorageParameters", "AccountingStoragePass",
    "AccountingStoragePort", "AccountingStorageTRES", "AccountingStorageType",
    "AccountingStorageUser", "AccountingStoreFlags", "AccountingStoreJobComment",
    "AcctGatherEnergyType", "AcctGatherFilesystemType", "AcctGatherInfinibandType",
    "AcctGatherInterconnectType", "AcctGatherNodeFreq", "AcctGatherProfileType",
    "AllowSpecResourcesUsage", "AuthAltParameters", "AuthAltTypes", "AuthInfo", "AuthType",
    "BackupAddr", "BackupController", "BatchStartTimeout", "BcastExclude", "BcastParameters",
    "BurstBufferParameters", "BurstBufferType", "CertgenParameters", "CertgenType",
    "CertmgrParameters", "CertmgrType", "CliFilterParameters", "CliFilterPlugins",
    "ClusterName", "CommunicationParameters", "CompleteWait", "ControlAddr", "ControlMachine",
    "CoreSpecPlugin", "CpuFreqDef", "CpuFreqGovernors", "CredType", "CryptoType",
    "DataParserParameters", "DebugFlags", "DefCPUPerGPU", "DefMemPerCPU", "DefMemPerGPU",
    "DefMemPerNode", "DefRuntimePlugin", "DependencyParameters", "DisableRootJobs",
    "DownNodes", "EioTimeout", "EnforcePartLimits", "Epilog", "EpilogMsgTime",
    "EpilogSlurmctld", "EpilogTimeout", "ExtSensorsFreq", "ExtSensorsType",
    "FairShareDampeningFactor", "FastSchedule", "FederationParameters", "FirstJobId",
    "GetEnvTimeout", "GpuFreqDef", "GresTypes", "GroupUpdateForce", "GroupUpdateTime",
    "HashPlugin", "HealthCheckInterval", "HealthCheckNodeState", "HealthCheckProgram",
    "HealthCheckTimeout", "HttpParserType", "InactiveLimit", "InteractiveStepOptions",
    "JobAcctGatherFrequency", "JobAcctGatherParams", "JobAcctGatherType", "JobCompHost",
    "JobCompLoc", "JobCompParams", "JobCompPass", "JobCompPassScript", "JobCompPort",
    "JobCompType", "JobCompUser", "JobContainerType", "JobCredentialPrivateKey",
    "JobCredentialPublicCertificate", "JobFileAppend", "JobRequeue", "JobSubmitPlugins",
    "KeepAliveTime", "KillOnBadExit", "KillWait", "LaunchParameters", "LaunchType",
    "LicenseParameters", "Licenses", "LogTimeFormat", "MailDomain", "MailProg", "MaxArraySize",
    "MaxBatchRequeue", "MaxDBDMsgs", "MaxJobCount", "MaxJobId", "MaxMemPerCPU",
    "MaxMemPerNode", "MaxNodeCount", "MaxStepCount", "MaxTasksPerNode", "MCSParameters",
    "MCSPlugin", "MessageTimeout", "MetricsAuthUsers", "MetricsParameters", "MetricsType",
    "MinJobAge", "MpiDefault", "MpiParams", "NamespaceType", "NodeFeaturesPlugins", "NodeName",
    "NodeSet", "OverTimeLimit", "PartitionName", "PluginDir", "PlugStackConfig", "PowerAction",
    "PowerParameters", "PowerPlugin", "PreemptExemptTime", "PreemptMode", "PreemptParameters",
    "PreemptType", "PrEpParameters", "PrEpPlugins", "PriorityCalcPeriod",
    "PriorityDecayHalfLife", "PriorityFavorSmall", "PriorityFlags", "PriorityMaxAge",
    "PriorityParameters", "PrioritySiteFactorParameters", "PrioritySiteFactorPlugin",
    "PriorityType", "PriorityUsageResetPeriod", "PriorityWeightAge", "PriorityWeightAssoc",
    "PriorityWeightFairshare", "PriorityWeightJobSize", "PriorityWeightPartition",
    "PriorityWeightQOS", "PriorityWeightTRES", "PrivateData", "ProctrackType", "Prolog",
    "PrologEpilogTimeout", "PrologFlags", "PrologSlurmctld", "PrologTimeout",
    "PropagatePrioProcess", "PropagateResourceLimits", "PropagateResourceLimitsExcept",
    "RebootProgram", "ReconfigFlags", "RequeueExit", "RequeueExitHold", "ResumeFailProgram",
    "ResumeProgram", "ResumeRate", "ResumeTimeout", "ResvEpilog", "ResvOverRun", "ResvProlog",
    "ReturnToService", "RoutePlugin", "SallocDefaultCommand", "SbcastParameters",
    "SchedulerParameters", "SchedulerTimeSlice", "SchedulerType", "ScronParameters",
    "SelectType", "SelectTypeParameters", "SerializerParameters", "SerializerPlugins",
    "SlurmctldAddr", "SlurmctldDebug", "SlurmctldHost", "SlurmctldHttpAuthParameters",
    "SlurmctldLogFile", "SlurmctldParameters", "SlurmctldPidFile", "SlurmctldPort",
    "SlurmctldPrimaryOffProg", "SlurmctldPrimaryOnProg", "SlurmctldSyslogDebug",
    "SlurmctldTimeout", "SlurmdDebug", "SlurmdHttpAuthParameters", "SlurmdLogFile",
    "SlurmdParameters", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir", "SlurmdSyslogDebug",
    "SlurmdTimeout", "SlurmdUser", "SlurmrestdHttpAuthParameters", "SlurmrestdParameters",
    "SlurmSchedLogFile", "SlurmSchedLogLevel", "SlurmstepdParameters", "SlurmUser",
    "SrunEpilog", "SrunPortRange", "SrunProlog", "StateSaveLocation", "SuspendExcNodes",
    "SuspendExcParts", "SuspendExcStates", "SuspendProgram", "SuspendRate", "SuspendTime",
    "SuspendTimeout", "SwitchParameters", "SwitchType", "TaskEpilog", "TaskPlugin",
    "TaskPluginParam", "TaskProlog", "TCPTimeout", "TLSParameters", "TLSType", "TmpFS",
    "TopologyParam", "TopologyPlugin", "TrackWCKey", "TreeWidth", "UnkillableStepProgram",
    "UnkillableStepTimeout", "UrlParserType", "UsePAM", "VSizeFactor", "WaitTime",
    "X11Parameters"
)

NODE_KEYS: tuple[str, ...] = (  # _nodename_options
    "BcastAddr", "Boards", "CoreSpecCount", "CoresPerSocket", "CpuBind", "CPUs", "CPUSpecList",
    "Feature", "Features", "Gres", "GresConf", "MemSpecLimit", "NodeAddr", "NodeHostname",
    "Parameters", "Port", "Procs", "RealMemory", "Reason", "RestrictedCoresPerGPU", "Sockets",
    "SocketsPerBoard", "State", "SuspendTime", "ThreadsPerCore", "TmpDisk", "Topology",
    "TRESWeights", "Weight"
)

PARTITION_KEYS: tuple[str, ...] = (  # _partition_options
    "AllocNodes", "AllowAccounts", "AllowGroups", "AllowQos", "Alternate", "CpuBind",
    "Default", "DefaultTime", "DefCPUPerGPU", "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode",
    "DenyAccounts", "DenyQos", "DisableRootJobs", "ExclusiveTopo", "ExclusiveUser",
    "GraceTime", "Hidden", "LLN", "MaxCPUsPerNode", "MaxCPUsPerSocket", "MaxMemPerCPU",
    "MaxMemPerNode", "MaxNodes", "MaxTime", "MinNodes", "Nodes", "OverSubscribe",
    "OverTimeLimit", "PowerDownOnIdle", "PreemptMode", "Priority", "PriorityJobFactor",
    "PriorityTier", "QOS", "ReqResv", "ResumeTimeout", "RootOnly", "SelectTypeParameters",
    "Shared", "State", "SuspendTime", "SuspendTimeout", "Topology", "TRESBillingWeights"
)

SCHEDULER_PARAMETERS = frozenset((
    "allow_zero_lic", "assoc_limit_stop", "batch_sched_delay", "bb_array_stage_cnt",
    "bf_allow_magnetic_slot", "bf_busy_nodes", "bf_continue", "bf_hetjob_immediate",
    "bf_hetjob_prio", "bf_interval", "bf_job_part_count_reserve", "bf_licenses",
    "bf_max_job_array_resv", "bf_max_job_assoc", "bf_max_job_part", "bf_max_job_start",
    "bf_max_job_test", "bf_max_job_user", "bf_max_job_user_part", "bf_max_time",
    "bf_min_age_reserve", "bf_min_prio_reserve", "bf_node_space_size", "bf_one_resv_per_job",
    "bf_resolution", "bf_running_job_reserve", "bf_topopt_enable", "bf_topopt_iterations",
    "bf_window", "bf_window_linear", "bf_yield_interval", "bf_yield_rpc_cnt", "bf_yield_sleep",
    "build_queue_timeout", "correspond_after_task_cnt", "default_queue_depth", "defer",
    "defer_batch", "delay_boot", "disable_hetjob_steps", "disable_job_shrink",
    "enable_hetjob_steps", "enable_user_top", "extra_constraints",
    "ignore_constraint_validation", "ignore_prefer_validation", "max_array_tasks",
    "max_rpc_cnt", "max_sched_time", "max_script_size", "max_submit_line_size",
    "max_switch_wait", "no_backup_scheduling", "nohold_on_prolog_fail", "pack_serial_at_end",
    "partition_job_depth", "reduce_completing_frag", "requeue_delay",
    "requeue_on_resume_failure", "salloc_wait_nodes", "sbatch_wait_nodes", "sched_interval",
    "sched_max_job_start", "sched_min_interval", "spec_cores_first", "step_retry_count",
    "step_retry_time", "time_min_as_soft_limit", "whole_hetjob"))
"""The SchedulerParameters options slurm.conf(5) describes (a bare ``bf_window=2880`` in a
change is one of them)."""

GLOBAL: Mapping[str, str] = {k.lower(): k for k in GLOBAL_KEYS}
"""Lower-case spelling -> Slurm's, for the keys of the whole file."""
NODE: Mapping[str, str] = {k.lower(): k for k in NODE_KEYS}
"""Lower-case spelling -> Slurm's, for a NodeName= line."""
PARTITION: Mapping[str, str] = {k.lower(): k for k in PARTITION_KEYS}
"""Lower-case spelling -> Slurm's, for a PartitionName= line."""


def canonical(key: str, table: Mapping[str, str]) -> str | None:
    """Slurm's spelling of ``key`` in ``table`` (:data:`GLOBAL`, :data:`NODE`,
    :data:`PARTITION`), or None when Slurm does not know it there."""
    return table.get(key.lower())
