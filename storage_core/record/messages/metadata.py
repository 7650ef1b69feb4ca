"""The KRaft metadata records of ``__cluster_metadata`` and of KRaft snapshots.

Written from Kafka's definitions in apache/kafka ``metadata/src/main/resources/common/metadata/``
(each table names its file). Every metadata record is flexible from version 0. On disk each record
value is framed by ``AbstractApiMessageSerde``: an unsigned varint frame version (1), an unsigned
varint record type (the apiKey below), an unsigned varint version, then the record.
"""

from __future__ import annotations

from storage_core.record.messages.schema import F, FieldSpec, MessageSpec, message

MD = "metadata/src/main/resources/common/metadata/"


def _record(name: str, api_key: int, valid: str, fields: tuple[FieldSpec, ...] = (), *, notes: str = "") -> MessageSpec:
    return message(name, api_key, valid, "0+", fields, source=MD + name + ".json", notes=notes)


ENDPOINT = (
    F("Name", "string", "0+", about="The endpoint's listener name."),
    F("Host", "string", "0+", about="The hostname."),
    F("Port", "uint16", "0+", about="The port."),
    F("SecurityProtocol", "int16", "0+", about="The security protocol."),
)
FEATURE_RANGE = (
    F("Name", "string", "0+", about="The feature name."),
    F("MinSupportedVersion", "int16", "0+", about="The minimum supported feature level."),
    F("MaxSupportedVersion", "int16", "0+", about="The maximum supported feature level."),
)

#: RegisterBrokerRecord.json: v1 InControlledShutdown, v2 IsMigratingZkBroker, v3 LogDirs (tagged),
#: v4 CordonedLogDirs (tagged; Kafka 4.3, KIP-1066).
REGISTER_BROKER_RECORD = _record("RegisterBrokerRecord", 0, "0-4", (
    F("BrokerId", "int32", "0+", about="The broker id."),
    F("IsMigratingZkBroker", "bool", "2+", default=False, about="True for a ZK broker in migration mode."),
    F("IncarnationId", "uuid", "0+", about="The incarnation id of the broker process."),
    F("BrokerEpoch", "int64", "0+", about="The broker epoch assigned by the controller."),
    F("EndPoints", "[]BrokerEndpoint", "0+", fields=ENDPOINT, about="The broker's endpoints."),
    F("Features", "[]BrokerFeature", "0+", fields=FEATURE_RANGE, about="The features on this broker."),
    F("Rack", "string", "0+", nullable="0+", about="The broker rack."),
    F("Fenced", "bool", "0+", default=True, about="True if the broker is fenced."),
    F("InControlledShutdown", "bool", "1+", default=False, about="True if in controlled shutdown."),
    F("LogDirs", "[]uuid", "3+", tagged="3+", tag=0, about="The broker's available log directories."),
    F("CordonedLogDirs", "[]uuid", "4+", nullable="4+", tagged="4+", tag=1,
      about="The broker's cordoned log directories (no new partitions are placed on them)."),
))
UNREGISTER_BROKER_RECORD = _record("UnregisterBrokerRecord", 1, "0", (
    F("BrokerId", "int32", "0+", about="The broker id."),
    F("BrokerEpoch", "int64", "0+", about="The broker epoch."),
))
TOPIC_RECORD = _record("TopicRecord", 2, "0", (
    F("Name", "string", "0+", about="The topic name."),
    F("TopicId", "uuid", "0+", about="The unique id of this topic."),
))
#: PartitionRecord.json: v1 adds Directories (KIP-858), v2 the tagged ELR fields (KIP-966).
PARTITION_RECORD = _record("PartitionRecord", 3, "0-2", (
    F("PartitionId", "int32", "0+", default=-1, about="The partition id."),
    F("TopicId", "uuid", "0+", about="The topic id."),
    F("Replicas", "[]int32", "0+", about="The replicas, in preferred order."),
    F("Isr", "[]int32", "0+", about="The in-sync replicas."),
    F("RemovingReplicas", "[]int32", "0+", about="The replicas being removed."),
    F("AddingReplicas", "[]int32", "0+", about="The replicas being added."),
    F("Leader", "int32", "0+", default=-1, about="The leader, or -1."),
    F("LeaderRecoveryState", "int8", "0+", tagged="0+", tag=0, default=0,
      about="1 if recovering from an unclean leader election."),
    F("LeaderEpoch", "int32", "0+", default=-1, about="The leader epoch."),
    F("PartitionEpoch", "int32", "0+", default=-1, about="Incremented on every change of the partition."),
    F("Directories", "[]uuid", "1+", about="The log directory of each replica, in Replicas order."),
    F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tagged="2+", tag=1,
      about="The eligible leader replicas."),
    F("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=2, about="The last known ELR."),
))
#: ConfigRecord.json: Value is null when a config is deleted.
CONFIG_RECORD = _record("ConfigRecord", 4, "0", (
    F("ResourceType", "int8", "0+", about="The resource type (2 topic, 4 broker, ...)."),
    F("ResourceName", "string", "0+", about="The resource name (empty: the cluster default)."),
    F("Name", "string", "0+", about="The config key."),
    F("Value", "string", "0+", nullable="0+", about="The config value, or null if removed."),
))
#: PartitionChangeRecord.json: v1 adds Directories, v2 the ELR fields (all tagged).
PARTITION_CHANGE_RECORD = _record("PartitionChangeRecord", 5, "0-2", (
    F("PartitionId", "int32", "0+", default=-1, about="The partition id."),
    F("TopicId", "uuid", "0+", about="The topic id."),
    F("Isr", "[]int32", "0+", nullable="0+", tagged="0+", tag=0, about="The new ISR, or null if unchanged."),
    F("Leader", "int32", "0+", tagged="0+", tag=1, default=-2,
      about="-1 no leader; -2 unchanged; else the new leader."),
    F("Replicas", "[]int32", "0+", nullable="0+", tagged="0+", tag=2, about="The new replicas, or null."),
    F("RemovingReplicas", "[]int32", "0+", nullable="0+", tagged="0+", tag=3,
      about="The new removing replicas, or null."),
    F("AddingReplicas", "[]int32", "0+", nullable="0+", tagged="0+", tag=4, about="The new adding replicas, or null."),
    F("LeaderRecoveryState", "int8", "0+", tagged="0+", tag=5, default=-1,
      about="-1 unchanged; 0 elected from the ISR; 1 unclean and recovering."),
    F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tagged="2+", tag=6,
      about="The new ELR, or null if unchanged."),
    F("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=7,
      about="The new last known ELR, or null if unchanged."),
    F("Directories", "[]uuid", "1+", nullable="1+", tagged="1+", tag=8, about="The new log directories, or null."),
), notes="the stored definition klog read ended at tag 5; tags 6-8 (ELR, LastKnownElr, Directories) follow "
         "Kafka 3.7+ and were checked on the fixtures' version-2 records (tag 6 holds int32 arrays)")
FENCE_BROKER_RECORD = _record("FenceBrokerRecord", 7, "0", (
    F("Id", "int32", "0+", about="The broker to fence."),
    F("Epoch", "int64", "0+", about="The broker's epoch."),
))
UNFENCE_BROKER_RECORD = _record("UnfenceBrokerRecord", 8, "0", (
    F("Id", "int32", "0+", about="The broker to unfence."),
    F("Epoch", "int64", "0+", about="The broker's epoch."),
))
REMOVE_TOPIC_RECORD = _record("RemoveTopicRecord", 9, "0", (
    F("TopicId", "uuid", "0+", about="The topic to remove, with its partitions."),
))
DELEGATION_TOKEN_RECORD = _record("DelegationTokenRecord", 10, "0", (
    F("Owner", "string", "0+", about="The token owner."),
    F("Requester", "string", "0+", about="The token requester."),
    F("Renewers", "[]string", "0+", about="The principals that can renew the token."),
    F("IssueTimestamp", "int64", "0+", about="When the token was issued."),
    F("MaxTimestamp", "int64", "0+", about="When it can no longer be renewed."),
    F("ExpirationTimestamp", "int64", "0+", about="When it must next be renewed."),
    F("TokenId", "string", "0+", about="The token id."),
))
USER_SCRAM_CREDENTIAL_RECORD = _record("UserScramCredentialRecord", 11, "0", (
    F("Name", "string", "0+", about="The user name."),
    F("Mechanism", "int8", "0+", about="The SCRAM mechanism."),
    F("Salt", "bytes", "0+", about="A random salt generated by the client."),
    F("StoredKey", "bytes", "0+", about="The key used in the SCRAM exchange to verify the client."),
    F("ServerKey", "bytes", "0+", about="The key the server signs with."),
    F("Iterations", "int32", "0+", about="The number of iterations used in the SCRAM credential."),
))
FEATURE_LEVEL_RECORD = _record("FeatureLevelRecord", 12, "0", (
    F("Name", "string", "0+", about="The feature name (metadata.version, kraft.version, ...)."),
    F("FeatureLevel", "int16", "0+", about="The finalized feature level; 0 means not supported."),
))
CLIENT_QUOTA_RECORD = _record("ClientQuotaRecord", 14, "0", (
    F("Entity", "[]EntityData", "0+", about="The quota entity.", fields=(
        F("EntityType", "string", "0+", about="The entity type."),
        F("EntityName", "string", "0+", nullable="0+", about="The entity name, or null for the default."),
    )),
    F("Key", "string", "0+", about="The quota config key."),
    F("Value", "float64", "0+", about="The value to set."),
    F("Remove", "bool", "0+", about="Whether the quota is removed."),
))
PRODUCER_IDS_RECORD = _record("ProducerIdsRecord", 15, "0", (
    F("BrokerId", "int32", "0+", about="The requesting broker."),
    F("BrokerEpoch", "int64", "0+", default=-1, about="The requesting broker's epoch."),
    F("NextProducerId", "int64", "0+", about="The first producer id of the next block."),
))
REMOVE_FEATURE_LEVEL_RECORD = _record("RemoveFeatureLevelRecord", 16, "0", (
    F("Name", "string", "0+", about="The feature name."),
), notes="written only by early KRaft development versions")
#: BrokerRegistrationChangeRecord.json: v1 InControlledShutdown, v2 LogDirs, v3 CordonedLogDirs (all
#: tagged; v3 from Kafka 4.3, KIP-1066).
BROKER_REGISTRATION_CHANGE_RECORD = _record("BrokerRegistrationChangeRecord", 17, "0-3", (
    F("BrokerId", "int32", "0+", about="The broker id."),
    F("BrokerEpoch", "int64", "0+", about="The broker epoch."),
    F("Fenced", "int8", "0+", tagged="0+", tag=0, default=0, about="-1 unfenced, 0 no change, 1 fenced."),
    F("InControlledShutdown", "int8", "1+", tagged="1+", tag=1, default=0,
      about="0 no change, 1 in controlled shutdown."),
    F("LogDirs", "[]uuid", "2+", tagged="2+", tag=2, about="The broker's available log directories."),
    F("CordonedLogDirs", "[]uuid", "3+", nullable="3+", tagged="3+", tag=3,
      about="The broker's cordoned log directories, or null if unchanged."),
))
ACCESS_CONTROL_ENTRY_RECORD = _record("AccessControlEntryRecord", 18, "0", (
    F("Id", "uuid", "0+", about="The ACL's id."),
    F("ResourceType", "int8", "0+", about="The resource type."),
    F("ResourceName", "string", "0+", about="The resource name."),
    F("PatternType", "int8", "0+", about="The resource pattern type."),
    F("Principal", "string", "0+", about="The principal."),
    F("Host", "string", "0+", about="The host."),
    F("Operation", "int8", "0+", about="The AclOperation."),
    F("PermissionType", "int8", "0+", about="The AclPermissionType."),
))
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = _record("RemoveAccessControlEntryRecord", 19, "0", (
    F("Id", "uuid", "0+", about="The ACL to remove."),
))
NO_OP_RECORD = _record("NoOpRecord", 20, "0")
ZK_MIGRATION_STATE_RECORD = _record("ZkMigrationStateRecord", 21, "0", (
    F("ZkMigrationState", "int8", "0+", about="The migration state."),
))
BEGIN_TRANSACTION_RECORD = _record("BeginTransactionRecord", 23, "0", (
    F("Name", "string", "0+", nullable="0+", tagged="0+", tag=0, about="A description of the transaction."),
))
END_TRANSACTION_RECORD = _record("EndTransactionRecord", 24, "0")
ABORT_TRANSACTION_RECORD = _record("AbortTransactionRecord", 25, "0", (
    F("Reason", "string", "0+", nullable="0+", tagged="0+", tag=0, about="Why the transaction was aborted."),
))
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = _record("RemoveUserScramCredentialRecord", 22, "0", (
    F("Name", "string", "0+", about="The user name."),
    F("Mechanism", "int8", "0+", about="The SCRAM mechanism."),
))
REMOVE_DELEGATION_TOKEN_RECORD = _record("RemoveDelegationTokenRecord", 26, "0", (
    F("TokenId", "string", "0+", about="The token to remove."),
))
REGISTER_CONTROLLER_RECORD = _record("RegisterControllerRecord", 27, "0", (
    F("ControllerId", "int32", "0+", about="The controller id."),
    F("IncarnationId", "uuid", "0+", about="The incarnation id of the controller process."),
    F("ZkMigrationReady", "bool", "0+", about="Whether the ZK migration configs are present."),
    F("EndPoints", "[]ControllerEndpoint", "0+", fields=ENDPOINT, about="The controller's endpoints."),
    F("Features", "[]ControllerFeature", "0+", fields=FEATURE_RANGE, about="The features on this controller."),
))
CLEAR_ELR_RECORD = _record("ClearElrRecord", 28, "0", (
    F("TopicName", "string", "0+", about="The topic whose ELRs to clear, or empty for all."),
))
#: UnregisterControllerRecord.json (Kafka 4.3): a controller removed from the registrations.
UNREGISTER_CONTROLLER_RECORD = _record("UnregisterControllerRecord", 29, "0", (
    F("ControllerId", "int32", "0+", about="The controller id."),
))

#: ``__cluster_metadata``: record type (apiKey) -> record.
METADATA_RECORDS: dict[int, MessageSpec] = {m.api_key: m for m in (
    REGISTER_BROKER_RECORD, UNREGISTER_BROKER_RECORD, TOPIC_RECORD, PARTITION_RECORD, CONFIG_RECORD,
    PARTITION_CHANGE_RECORD, FENCE_BROKER_RECORD, UNFENCE_BROKER_RECORD, REMOVE_TOPIC_RECORD,
    DELEGATION_TOKEN_RECORD, USER_SCRAM_CREDENTIAL_RECORD, FEATURE_LEVEL_RECORD, CLIENT_QUOTA_RECORD,
    PRODUCER_IDS_RECORD, REMOVE_FEATURE_LEVEL_RECORD, BROKER_REGISTRATION_CHANGE_RECORD,
    ACCESS_CONTROL_ENTRY_RECORD, REMOVE_ACCESS_CONTROL_ENTRY_RECORD, NO_OP_RECORD, ZK_MIGRATION_STATE_RECORD,
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD, BEGIN_TRANSACTION_RECORD, END_TRANSACTION_RECORD,
    ABORT_TRANSACTION_RECORD, REMOVE_DELEGATION_TOKEN_RECORD, REGISTER_CONTROLLER_RECORD, CLEAR_ELR_RECORD,
    UNREGISTER_CONTROLLER_RECORD,
) if m.api_key is not None}
