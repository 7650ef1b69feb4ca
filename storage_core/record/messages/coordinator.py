"""The coordinator records: keys and values of ``__consumer_offsets`` (group coordinator),
``__transaction_state`` (transaction coordinator) and ``__share_group_state`` (share coordinator).

Written from Kafka's definitions in apache/kafka (each table names its file):
``group-coordinator/src/main/resources/common/message/``,
``transaction-coordinator/src/main/resources/common/message/`` and
``share-coordinator/src/main/resources/common/message/``. A record's key is an int16 record type
(the key message's apiKey) then the key message at version 0; its value an int16 version then the
value message (``CoordinatorRecordSerde``). Before Kafka 4.0 the key's int16 was called the key
version: 0 and 1 are both OffsetCommit keys (0 from Kafka 0.8.2, 1 since), 2 GroupMetadata.
"""

from __future__ import annotations

from storage_core.record.messages.schema import F, FieldSpec, MessageSpec, message

GC = "group-coordinator/src/main/resources/common/message/"
TC = "transaction-coordinator/src/main/resources/common/message/"
SC = "share-coordinator/src/main/resources/common/message/"
IN_DEVELOPMENT = ("Kafka marks this schema as in development (subject to non-backwards-compatible changes); "
                  "the table follows the definition klog was written from")

# --- classic groups and offsets ---------------------------------------------------------------

OFFSET_COMMIT_KEY_FIELDS = (
    F("group", "string", "0", about="The consumer group id."),
    F("topic", "string", "0", about="The topic name."),
    F("partition", "int32", "0", about="The topic partition index."),
)

#: OffsetCommitKey.json (apiKey 1); LegacyOffsetCommitKey.json (apiKey 0) has the same fields.
LEGACY_OFFSET_COMMIT_KEY = message("LegacyOffsetCommitKey", 0, "0", "none", OFFSET_COMMIT_KEY_FIELDS,
                                   source=GC + "LegacyOffsetCommitKey.json")
OFFSET_COMMIT_KEY = message("OffsetCommitKey", 1, "0", "none", OFFSET_COMMIT_KEY_FIELDS,
                            source=GC + "OffsetCommitKey.json")

#: OffsetCommitValue.json: v1 adds expireTimestamp (v1 only), v3 leaderEpoch, v4 is flexible (and
#: Kafka 4.1 adds the tagged topicId, KIP-1094).
#: Also the value of a type-0 key: LegacyOffsetCommitValue.json is its version 0.
OFFSET_COMMIT_VALUE = message("OffsetCommitValue", 1, "0-4", "4+", (
    F("offset", "int64", "0+", about="The committed offset."),
    F("leaderEpoch", "int32", "3+", default=-1, about="The leader epoch of the last consumed record."),
    F("metadata", "string", "0+", about="Any metadata the client wants to keep."),
    F("commitTimestamp", "int64", "0+", about="The time the commit was added to the log."),
    F("expireTimestamp", "int64", "1", default=-1, about="When the commit expires (version 1 only)."),
    F("topicId", "uuid", "4+", tagged="4+", tag=0, about="The topic id of the committed offset."),
), source=GC + "OffsetCommitValue.json")

#: GroupMetadataKey.json (apiKey 2).
GROUP_METADATA_KEY = message("GroupMetadataKey", 2, "0", "none", (
    F("group", "string", "0", about="The group id."),
), source=GC + "GroupMetadataKey.json")

#: GroupMetadataValue.json's common struct MemberMetadata.
MEMBER_METADATA = (
    F("memberId", "string", "0+", about="The member id."),
    F("groupInstanceId", "string", "3+", nullable="3+", about="The static member's instance id."),
    F("clientId", "string", "0+", about="The client id."),
    F("clientHost", "string", "0+", about="The client host."),
    F("rebalanceTimeout", "int32", "1+", about="The rebalance timeout."),
    F("sessionTimeout", "int32", "0+", about="The session timeout."),
    F("subscription", "bytes", "0+", about="The protocol's subscription (consumer: ConsumerProtocolSubscription)."),
    F("assignment", "bytes", "0+", about="The protocol's assignment (consumer: ConsumerProtocolAssignment)."),
)

#: GroupMetadataValue.json: v1 adds rebalanceTimeout, v2 currentStateTimestamp, v3 groupInstanceId, v4 flexible.
GROUP_METADATA_VALUE = message("GroupMetadataValue", 2, "0-4", "4+", (
    F("protocolType", "string", "0+", about="The protocol type (consumer, connect, ...)."),
    F("generation", "int32", "0+", about="The generation id."),
    F("protocol", "string", "0+", nullable="0+", about="The chosen protocol (assignor)."),
    F("leader", "string", "0+", nullable="0+", about="The leader's member id."),
    F("currentStateTimestamp", "int64", "2+", default=-1, about="When the group's state last changed."),
    F("members", "[]MemberMetadata", "0+", fields=MEMBER_METADATA, about="The members."),
), source=GC + "GroupMetadataValue.json")

# --- consumer groups (KIP-848) ---------------------------------------------------------------


def _group_key(name: str, api_key: int, member: bool = False) -> MessageSpec:
    """The key of a group record: the group id, and the member id for a member's record."""
    fields: tuple[FieldSpec, ...] = (F("GroupId", "string", "0", about="The group id."),)
    if member:
        fields += (F("MemberId", "string", "0", about="The member id."),)
    return message(name, api_key, "0", "none", fields, source=GC + name + ".json")


CONSUMER_GROUP_METADATA_KEY = _group_key("ConsumerGroupMetadataKey", 3)
CONSUMER_GROUP_METADATA_VALUE = message("ConsumerGroupMetadataValue", 3, "0", "0+", (
    F("Epoch", "int32", "0+", about="The group epoch."),
    F("MetadataHash", "int64", "0+", tagged="0+", tag=0, default=0, about="The hash of all topics in the group."),
), source=GC + "ConsumerGroupMetadataValue.json")

PARTITION_RACKS = (
    F("Partition", "int32", "0+", about="The partition number."),
    F("Racks", "[]string", "0+", about="The racks the partition is mapped to."),
)
CONSUMER_GROUP_PARTITION_METADATA_KEY = _group_key("ConsumerGroupPartitionMetadataKey", 4)
CONSUMER_GROUP_PARTITION_METADATA_VALUE = message("ConsumerGroupPartitionMetadataValue", 4, "0", "0+", (
    F("Topics", "[]TopicMetadata", "0+", about="The topic metadata.", fields=(
        F("TopicId", "uuid", "0+", about="The topic id."),
        F("TopicName", "string", "0+", about="The topic name."),
        F("NumPartitions", "int32", "0+", about="The number of partitions."),
        F("PartitionMetadata", "[]PartitionMetadata", "0+", fields=PARTITION_RACKS,
          about="Partitions mapped to a set of racks."),
    )),
), source=GC + "ConsumerGroupPartitionMetadataValue.json",
    notes="deprecated since Kafka 4.1 (KIP-1101: the group's metadata hash replaced it); still read")

CLASSIC_PROTOCOL = (
    F("Name", "string", "0+", about="The protocol name."),
    F("Metadata", "bytes", "0+", about="The protocol metadata."),
)
CONSUMER_GROUP_MEMBER_METADATA_KEY = _group_key("ConsumerGroupMemberMetadataKey", 5, member=True)
CONSUMER_GROUP_MEMBER_METADATA_VALUE = message("ConsumerGroupMemberMetadataValue", 5, "0", "0+", (
    F("InstanceId", "string", "0+", nullable="0+", about="The (optional) instance id."),
    F("RackId", "string", "0+", nullable="0+", about="The (optional) rack id."),
    F("ClientId", "string", "0+", about="The client id."),
    F("ClientHost", "string", "0+", about="The client host."),
    F("SubscribedTopicNames", "[]string", "0+", about="The subscribed topic names."),
    F("SubscribedTopicRegex", "string", "0+", nullable="0+", about="The subscribed topic regular expression."),
    F("RebalanceTimeoutMs", "int32", "0+", default=-1, about="The rebalance timeout."),
    F("ServerAssignor", "string", "0+", nullable="0+", about="The server assignor, or null."),
    F("ClassicMemberMetadata", "ClassicMemberMetadata", "0+", nullable="0+", tagged="0+", tag=0,
      about="The classic protocol's metadata of a member that uses it; null otherwise.", fields=(
          F("SessionTimeoutMs", "int32", "0+", about="The session timeout."),
          F("SupportedProtocols", "[]ClassicProtocol", "0+", fields=CLASSIC_PROTOCOL,
            about="The protocols the member supports."),
      )),
), source=GC + "ConsumerGroupMemberMetadataValue.json")

#: The tagged field Kafka 4.3 adds to the target assignment metadata of every group type (KIP-1263).
ASSIGNMENT_TIMESTAMP = F("AssignmentTimestamp", "int64", "0+", tagged="0+", tag=0, default=0,
                         about="When the assignment calculation finished.")
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ConsumerGroupTargetAssignmentMetadataKey", 6)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message("ConsumerGroupTargetAssignmentMetadataValue", 6, "0", "0+", (
    F("AssignmentEpoch", "int32", "0+", about="The assignment epoch."),
    ASSIGNMENT_TIMESTAMP,
), source=GC + "ConsumerGroupTargetAssignmentMetadataValue.json")

TOPIC_PARTITIONS = (
    F("TopicId", "uuid", "0+", about="The topic id."),
    F("Partitions", "[]int32", "0+", about="The partition indexes."),
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _group_key("ConsumerGroupTargetAssignmentMemberKey", 7, member=True)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message("ConsumerGroupTargetAssignmentMemberValue", 7, "0", "0+", (
    F("TopicPartitions", "[]TopicPartition", "0+", fields=TOPIC_PARTITIONS, about="The assigned partitions."),
), source=GC + "ConsumerGroupTargetAssignmentMemberValue.json")

ASSIGNED_TOPIC_PARTITIONS = TOPIC_PARTITIONS + (
    F("AssignmentEpochs", "[]int32", "0+", nullable="0+", tagged="0+", tag=0, default=(),
      about="The epoch at which each partition was assigned (KIP-1251)."),
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _group_key("ConsumerGroupCurrentMemberAssignmentKey", 8, member=True)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message("ConsumerGroupCurrentMemberAssignmentValue", 8, "0", "0+", (
    F("MemberEpoch", "int32", "0+", about="The member epoch expected in the next heartbeat."),
    F("PreviousMemberEpoch", "int32", "0+", about="The epoch before the last bump."),
    F("State", "int8", "0+", about="The member state (MemberState)."),
    F("AssignedPartitions", "[]TopicPartitions", "0+", fields=ASSIGNED_TOPIC_PARTITIONS,
      about="The partitions assigned to (or owned by) the member."),
    F("PartitionsPendingRevocation", "[]TopicPartitions", "0+", fields=ASSIGNED_TOPIC_PARTITIONS,
      about="The partitions the member must revoke."),
), source=GC + "ConsumerGroupCurrentMemberAssignmentValue.json")

CONSUMER_GROUP_REGULAR_EXPRESSION_KEY = message("ConsumerGroupRegularExpressionKey", 16, "0", "none", (
    F("GroupId", "string", "0", about="The group id."),
    F("RegularExpression", "string", "0", about="The regular expression."),
), source=GC + "ConsumerGroupRegularExpressionKey.json")
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = message("ConsumerGroupRegularExpressionValue", 16, "0", "0+", (
    F("Topics", "[]string", "0+", about="The topics the expression matched."),
    F("Version", "int64", "0+", about="The metadata image version it was resolved against."),
    F("Timestamp", "int64", "0+", about="When it was resolved."),
), source=GC + "ConsumerGroupRegularExpressionValue.json")

# --- share groups (KIP-932) ------------------------------------------------------------------

SHARE_GROUP_PARTITION_METADATA_KEY = _group_key("ShareGroupPartitionMetadataKey", 9)
SHARE_GROUP_PARTITION_METADATA_VALUE = message("ShareGroupPartitionMetadataValue", 9, "0", "0+", (
    F("Topics", "[]TopicMetadata", "0+", about="The topic metadata.", fields=(
        F("TopicId", "uuid", "0+", about="The topic id."),
        F("TopicName", "string", "0+", about="The topic name."),
        F("NumPartitions", "int32", "0+", about="The number of partitions."),
        F("PartitionMetadata", "[]PartitionMetadata", "0+", fields=PARTITION_RACKS,
          about="Partitions mapped to a set of racks."),
    )),
), source=GC + "ShareGroupPartitionMetadataValue.json", notes=IN_DEVELOPMENT + "; removed from later Kafka")

SHARE_GROUP_MEMBER_METADATA_KEY = _group_key("ShareGroupMemberMetadataKey", 10, member=True)
SHARE_GROUP_MEMBER_METADATA_VALUE = message("ShareGroupMemberMetadataValue", 10, "0", "0+", (
    F("RackId", "string", "0+", nullable="0+", about="The (optional) rack id."),
    F("ClientId", "string", "0+", about="The client id."),
    F("ClientHost", "string", "0+", about="The client host."),
    F("SubscribedTopicNames", "[]string", "0+", about="The subscribed topic names."),
), source=GC + "ShareGroupMemberMetadataValue.json")

SHARE_GROUP_METADATA_KEY = _group_key("ShareGroupMetadataKey", 11)
SHARE_GROUP_METADATA_VALUE = message("ShareGroupMetadataValue", 11, "0", "0+", (
    F("Epoch", "int32", "0+", about="The group epoch."),
    F("MetadataHash", "int64", "0+", about="The hash of all topics in the group."),
), source=GC + "ShareGroupMetadataValue.json")

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ShareGroupTargetAssignmentMetadataKey", 12)
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message("ShareGroupTargetAssignmentMetadataValue", 12, "0", "0+", (
    F("AssignmentEpoch", "int32", "0+", about="The assignment epoch."),
    ASSIGNMENT_TIMESTAMP,
), source=GC + "ShareGroupTargetAssignmentMetadataValue.json")

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _group_key("ShareGroupTargetAssignmentMemberKey", 13, member=True)
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message("ShareGroupTargetAssignmentMemberValue", 13, "0", "0+", (
    F("TopicPartitions", "[]TopicPartition", "0+", fields=TOPIC_PARTITIONS, about="The assigned partitions."),
), source=GC + "ShareGroupTargetAssignmentMemberValue.json")

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _group_key("ShareGroupCurrentMemberAssignmentKey", 14, member=True)
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message("ShareGroupCurrentMemberAssignmentValue", 14, "0", "0+", (
    F("MemberEpoch", "int32", "0+", about="The member epoch expected in the next heartbeat."),
    F("PreviousMemberEpoch", "int32", "0+", about="The epoch before the last bump."),
    F("State", "int8", "0+", about="The member state (MemberState)."),
    F("AssignedPartitions", "[]TopicPartitions", "0+", fields=TOPIC_PARTITIONS,
      about="The partitions assigned to the member."),
), source=GC + "ShareGroupCurrentMemberAssignmentValue.json")

TOPIC_PARTITIONS_INFO = (
    F("TopicId", "uuid", "0+", about="The topic id."),
    F("TopicName", "string", "0+", about="The topic name."),
    F("Partitions", "[]int32", "0+", about="The partitions."),
)
SHARE_GROUP_STATE_PARTITION_METADATA_KEY = _group_key("ShareGroupStatePartitionMetadataKey", 15)
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = message("ShareGroupStatePartitionMetadataValue", 15, "0", "0+", (
    F("InitializingTopics", "[]TopicPartitionsInfo", "0+", fields=TOPIC_PARTITIONS_INFO,
      about="The topic-partitions whose share-group state is being initialized."),
    F("InitializedTopics", "[]TopicPartitionsInfo", "0+", fields=TOPIC_PARTITIONS_INFO,
      about="The topics with initialized share-group state."),
    F("DeletingTopics", "[]TopicInfo", "0+", about="The topics whose share-group state is being deleted.", fields=(
        F("TopicId", "uuid", "0+", about="The topic id."),
        F("TopicName", "string", "0+", about="The topic name."),
    )),
), source=GC + "ShareGroupStatePartitionMetadataValue.json")

# --- streams groups (KIP-1071) ---------------------------------------------------------------

KEY_VALUE = (
    F("Key", "string", "0+", about="The key."),
    F("Value", "string", "0+", about="The value."),
)
TASK_IDS = (
    F("SubtopologyId", "string", "0+", about="The subtopology id."),
    F("Partitions", "[]int32", "0+", about="The partitions of the input topics processed by this member."),
)
#: A member's current tasks also carry the epoch each partition was assigned at (KIP-1251, Kafka 4.3).
ASSIGNED_TASK_IDS = TASK_IDS + (
    F("AssignmentEpochs", "[]int32", "0+", nullable="0+", tagged="0+", tag=0, default=(),
      about="The epoch at which each partition was assigned."),
)

STREAMS_GROUP_METADATA_KEY = _group_key("StreamsGroupMetadataKey", 17)
STREAMS_GROUP_METADATA_VALUE = message("StreamsGroupMetadataValue", 17, "0", "0+", (
    F("Epoch", "int32", "0+", about="The group epoch."),
    F("MetadataHash", "int64", "0+", about="The hash of all topics in the group."),
    F("ValidatedTopologyEpoch", "int32", "0+", tagged="0+", tag=0, default=-1,
      about="The topology epoch whose topics were validated against the metadata."),
    F("LastAssignmentConfigs", "[]LastAssignmentConfig", "0+", nullable="0+", tagged="0+", tag=1, default=(), fields=KEY_VALUE,
      about="The assignment configuration the last assignment was computed with."),
    F("StoredDescriptionTopologyEpoch", "int32", "0+", tagged="0+", tag=2, default=-1,
      about="The topology epoch of the stored topology description (KIP-1071)."),
    F("FailedDescriptionTopologyEpoch", "int32", "0+", tagged="0+", tag=3, default=-1,
      about="The topology epoch whose description failed to be stored."),
), source=GC + "StreamsGroupMetadataValue.json", notes=IN_DEVELOPMENT)

TOPIC_INFO = (
    F("Name", "string", "0+", about="The topic name."),
    F("Partitions", "int32", "0+", about="The number of partitions (0: not enforced)."),
    F("ReplicationFactor", "int16", "0+", about="The replication factor (0: the default)."),
    F("TopicConfigs", "[]TopicConfig", "0+", about="Topic-level configurations.", fields=(
        F("key", "string", "0+", about="The config key."),
        F("value", "string", "0+", about="The config value."),
    )),
)
STREAMS_GROUP_TOPOLOGY_KEY = _group_key("StreamsGroupTopologyKey", 23)
STREAMS_GROUP_TOPOLOGY_VALUE = message("StreamsGroupTopologyValue", 23, "0", "0+", (
    F("Epoch", "int32", "0+", about="The epoch of the topology."),
    F("Subtopologies", "[]Subtopology", "0+", about="The sub-topologies.", fields=(
        F("SubtopologyId", "string", "0+", about="The sub-topology id."),
        F("SourceTopics", "[]string", "0+", about="The topics it reads from."),
        F("SourceTopicRegex", "[]string", "0+", about="Regular expressions of topics it reads from."),
        F("StateChangelogTopics", "[]TopicInfo", "0+", fields=TOPIC_INFO, about="Its state changelog topics."),
        F("RepartitionSinkTopics", "[]string", "0+", about="The repartition topics it writes to."),
        F("RepartitionSourceTopics", "[]TopicInfo", "0+", fields=TOPIC_INFO,
          about="Its source topics that are internal repartition topics."),
        F("CopartitionGroups", "[]CopartitionGroup", "0+", about="Source topics that must be copartitioned.",
          fields=(
              F("SourceTopics", "[]int16", "0+", about="Indexes into SourceTopics."),
              F("SourceTopicRegex", "[]int16", "0+", about="Indexes into SourceTopicRegex."),
              F("RepartitionSourceTopics", "[]int16", "0+", about="Indexes into RepartitionSourceTopics."),
          )),
    )),
), source=GC + "StreamsGroupTopologyValue.json", notes=IN_DEVELOPMENT)

STREAMS_GROUP_PARTITION_METADATA_KEY = _group_key("StreamsGroupPartitionMetadataKey", 18)
STREAMS_GROUP_PARTITION_METADATA_VALUE = message("StreamsGroupPartitionMetadataValue", 18, "0", "0+", (
    F("Topics", "[]TopicMetadata", "0+", about="The topic metadata.", fields=(
        F("TopicId", "uuid", "0+", about="The topic id."),
        F("TopicName", "string", "0+", about="The topic name."),
        F("NumPartitions", "int32", "0+", about="The number of partitions."),
        F("PartitionMetadata", "[]PartitionMetadata", "0+", fields=PARTITION_RACKS,
          about="Partitions mapped to a set of racks."),
    )),
), source=GC + "StreamsGroupPartitionMetadataValue.json", notes=IN_DEVELOPMENT)

STREAMS_GROUP_MEMBER_METADATA_KEY = _group_key("StreamsGroupMemberMetadataKey", 19, member=True)
STREAMS_GROUP_MEMBER_METADATA_VALUE = message("StreamsGroupMemberMetadataValue", 19, "0", "0+", (
    F("InstanceId", "string", "0+", nullable="0+", about="The (optional) instance id."),
    F("RackId", "string", "0+", nullable="0+", about="The (optional) rack id."),
    F("ClientId", "string", "0+", about="The client id."),
    F("ClientHost", "string", "0+", about="The client host."),
    F("RebalanceTimeoutMs", "int32", "0+", default=-1, about="The rebalance timeout."),
    F("TopologyEpoch", "int32", "0+", about="The epoch of the topology."),
    F("ProcessId", "string", "0+", about="The streams instance (may run several consumers)."),
    F("UserEndpoint", "Endpoint", "0+", nullable="0+", about="The endpoint for interactive queries.", fields=(
        F("Host", "string", "0+", about="The host."),
        F("Port", "uint16", "0+", about="The port."),
    )),
    F("ClientTags", "[]KeyValue", "0+", fields=KEY_VALUE, about="Tags for rack-aware assignment."),
), source=GC + "StreamsGroupMemberMetadataValue.json", notes=IN_DEVELOPMENT)

STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("StreamsGroupTargetAssignmentMetadataKey", 20)
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = message("StreamsGroupTargetAssignmentMetadataValue", 20, "0", "0+", (
    F("AssignmentEpoch", "int32", "0+", about="The assignment epoch."),
    ASSIGNMENT_TIMESTAMP,
), source=GC + "StreamsGroupTargetAssignmentMetadataValue.json", notes=IN_DEVELOPMENT)

STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _group_key("StreamsGroupTargetAssignmentMemberKey", 21, member=True)
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = message("StreamsGroupTargetAssignmentMemberValue", 21, "0", "0+", (
    F("ActiveTasks", "[]TaskIds", "0+", fields=TASK_IDS, about="The assigned active tasks."),
    F("StandbyTasks", "[]TaskIds", "0+", fields=TASK_IDS, about="The assigned standby tasks."),
    F("WarmupTasks", "[]TaskIds", "0+", fields=TASK_IDS, about="The assigned warm-up tasks."),
), source=GC + "StreamsGroupTargetAssignmentMemberValue.json", notes=IN_DEVELOPMENT)

STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _group_key("StreamsGroupCurrentMemberAssignmentKey", 22, member=True)
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = message("StreamsGroupCurrentMemberAssignmentValue", 22, "0", "0+", (
    F("MemberEpoch", "int32", "0+", about="The member epoch expected in the next heartbeat."),
    F("PreviousMemberEpoch", "int32", "0+", about="The epoch before the last bump."),
    F("State", "int8", "0+", about="The member state."),
    F("ActiveTasks", "[]TaskIds", "0+", fields=ASSIGNED_TASK_IDS, about="The assigned active tasks."),
    F("StandbyTasks", "[]TaskIds", "0+", fields=ASSIGNED_TASK_IDS, about="The assigned standby tasks."),
    F("WarmupTasks", "[]TaskIds", "0+", fields=ASSIGNED_TASK_IDS, about="The assigned warm-up tasks."),
    F("ActiveTasksPendingRevocation", "[]TaskIds", "0+", fields=ASSIGNED_TASK_IDS, about="Active tasks to revoke."),
    F("StandbyTasksPendingRevocation", "[]TaskIds", "0+", fields=ASSIGNED_TASK_IDS, about="Standby tasks to revoke."),
    F("WarmupTasksPendingRevocation", "[]TaskIds", "0+", fields=ASSIGNED_TASK_IDS, about="Warm-up tasks to revoke."),
), source=GC + "StreamsGroupCurrentMemberAssignmentValue.json", notes=IN_DEVELOPMENT)

STREAMS_GROUP_TARGET_ASSIGNMENT_RESOLVED_TOPIC_IDS_KEY = _group_key("StreamsGroupTargetAssignmentResolvedTopicIdsKey", 24)
STREAMS_GROUP_TARGET_ASSIGNMENT_RESOLVED_TOPIC_IDS_VALUE = message(
    "StreamsGroupTargetAssignmentResolvedTopicIdsValue", 24, "0", "0+", (
        F("AssignmentEpoch", "int32", "0+", about="The assignment epoch of this snapshot."),
        F("ResolvedTopicIdsBySubtopology", "[]ResolvedTopicIds", "0+", about="Topic ids by subtopology.", fields=(
            F("SubtopologyId", "string", "0+", about="The subtopology id."),
            F("TopicIds", "[]uuid", "0+", about="The resolved topic ids."),
        )),
    ), source=GC + "StreamsGroupTargetAssignmentResolvedTopicIdsValue.json", notes=IN_DEVELOPMENT)

#: ``__consumer_offsets``: record type -> (key, value).
GROUP_RECORDS: dict[int, tuple[MessageSpec, MessageSpec]] = {
    0: (LEGACY_OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    3: (CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_METADATA_VALUE),
    4: (CONSUMER_GROUP_PARTITION_METADATA_KEY, CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: (CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: (CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    9: (SHARE_GROUP_PARTITION_METADATA_KEY, SHARE_GROUP_PARTITION_METADATA_VALUE),
    10: (SHARE_GROUP_MEMBER_METADATA_KEY, SHARE_GROUP_MEMBER_METADATA_VALUE),
    11: (SHARE_GROUP_METADATA_KEY, SHARE_GROUP_METADATA_VALUE),
    12: (SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    13: (SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    14: (SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    15: (SHARE_GROUP_STATE_PARTITION_METADATA_KEY, SHARE_GROUP_STATE_PARTITION_METADATA_VALUE),
    16: (CONSUMER_GROUP_REGULAR_EXPRESSION_KEY, CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
    17: (STREAMS_GROUP_METADATA_KEY, STREAMS_GROUP_METADATA_VALUE),
    18: (STREAMS_GROUP_PARTITION_METADATA_KEY, STREAMS_GROUP_PARTITION_METADATA_VALUE),
    19: (STREAMS_GROUP_MEMBER_METADATA_KEY, STREAMS_GROUP_MEMBER_METADATA_VALUE),
    20: (STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    21: (STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    22: (STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    23: (STREAMS_GROUP_TOPOLOGY_KEY, STREAMS_GROUP_TOPOLOGY_VALUE),
    24: (STREAMS_GROUP_TARGET_ASSIGNMENT_RESOLVED_TOPIC_IDS_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_RESOLVED_TOPIC_IDS_VALUE),
}

# --- transactions ----------------------------------------------------------------------------

#: TransactionLogKey.json (apiKey 0).
TRANSACTION_LOG_KEY = message("TransactionLogKey", 0, "0", "none", (
    F("TransactionalId", "string", "0", about="The transactional id."),
), source=TC + "TransactionLogKey.json")

#: TransactionLogValue.json: v1 is flexible and adds the tagged PreviousProducerId, NextProducerId,
#: ClientTransactionVersion (KIP-890) and, in releases after 4.1, NextProducerEpoch.
TRANSACTION_LOG_VALUE = message("TransactionLogValue", 0, "0-1", "1+", (
    F("ProducerId", "int64", "0+", about="The producer id in use by the transactional id."),
    F("PreviousProducerId", "int64", "1+", tagged="1+", tag=0, default=-1,
      about="The producer id of the last committed transaction."),
    F("NextProducerId", "int64", "1+", tagged="1+", tag=1, default=-1,
      about="The latest producer id sent to the producer."),
    F("ProducerEpoch", "int16", "0+", about="The producer epoch."),
    F("NextProducerEpoch", "int16", "1+", tagged="1+", tag=3, default=-1,
      about="The producer epoch sent to the producer with NextProducerId."),
    F("TransactionTimeoutMs", "int32", "0+", about="The transaction timeout."),
    F("TransactionStatus", "int8", "0+", about="The TransactionState."),
    F("TransactionPartitions", "[]PartitionsSchema", "0+", nullable="0+", about="The partitions in the transaction.",
      fields=(
          F("Topic", "string", "0+", about="The topic."),
          F("PartitionIds", "[]int32", "0+", about="The partition ids."),
      )),
    F("TransactionLastUpdateTimestampMs", "int64", "0+", about="When the transaction was last updated."),
    F("TransactionStartTimestampMs", "int64", "0+", about="When the transaction started."),
    F("ClientTransactionVersion", "int16", "1+", tagged="1+", tag=2, default=0,
      about="The transaction version the client used."),
), source=TC + "TransactionLogValue.json")

#: ``__transaction_state``: record type -> (key, value).
TRANSACTION_RECORDS: dict[int, tuple[MessageSpec, MessageSpec]] = {0: (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}

# --- share-group state (KIP-932) -------------------------------------------------------------

SHARE_PARTITION_KEY = (
    F("GroupId", "string", "0", about="The group id."),
    F("TopicId", "uuid", "0", about="The topic id."),
    F("Partition", "int32", "0", about="The partition index."),
)
STATE_BATCH = (
    F("FirstOffset", "int64", "0+", about="The first offset of the state batch."),
    F("LastOffset", "int64", "0+", about="The last offset of the state batch."),
    F("DeliveryState", "int8", "0+", about="0 available, 2 acked, 4 archived."),
    F("DeliveryCount", "int16", "0+", about="The delivery count."),
)
SHARE_SNAPSHOT_KEY = message("ShareSnapshotKey", 0, "0", "none", SHARE_PARTITION_KEY, source=SC + "ShareSnapshotKey.json")
SHARE_SNAPSHOT_VALUE = message("ShareSnapshotValue", 0, "0", "0+", (
    F("SnapshotEpoch", "int32", "0+", about="The snapshot epoch."),
    F("StateEpoch", "int32", "0+", about="The state epoch of the share-partition."),
    F("LeaderEpoch", "int32", "0+", about="The leader epoch of the share-partition."),
    F("StartOffset", "int64", "0+", about="The share-partition start offset."),
    F("DeliveryCompleteCount", "int32", "0+", tagged="0+", tag=0, default=-1,
      about="Offsets at or above the start offset whose delivery completed (KIP-1226)."),
    F("CreateTimestamp", "int64", "0+", about="When the snapshot was created."),
    F("WriteTimestamp", "int64", "0+", about="When the snapshot was written."),
    F("StateBatches", "[]StateBatch", "0+", fields=STATE_BATCH, about="The state batches."),
), source=SC + "ShareSnapshotValue.json")
SHARE_UPDATE_KEY = message("ShareUpdateKey", 1, "0", "none", SHARE_PARTITION_KEY, source=SC + "ShareUpdateKey.json")
SHARE_UPDATE_VALUE = message("ShareUpdateValue", 1, "0", "0+", (
    F("SnapshotEpoch", "int32", "0+", about="The snapshot epoch."),
    F("LeaderEpoch", "int32", "0+", about="The leader epoch of the share-partition."),
    F("StartOffset", "int64", "0+", about="The start offset, or -1 if not updated."),
    F("DeliveryCompleteCount", "int32", "0+", tagged="0+", tag=0, default=-1,
      about="Offsets at or above the start offset whose delivery completed (KIP-1226)."),
    F("StateBatches", "[]StateBatch", "0+", fields=STATE_BATCH, about="The updated state batches."),
), source=SC + "ShareUpdateValue.json")

#: ``__share_group_state``: record type -> (key, value).
SHARE_STATE_RECORDS: dict[int, tuple[MessageSpec, MessageSpec]] = {
    0: (SHARE_SNAPSHOT_KEY, SHARE_SNAPSHOT_VALUE),
    1: (SHARE_UPDATE_KEY, SHARE_UPDATE_VALUE),
}
