"""Messages of ``clients/src/main/resources/common/message/`` that live in log dirs: the consumer
protocol's subscription and assignment (inside ``GroupMetadataValue`` members when the group's
protocolType is ``consumer``) and the KRaft control records (values of control batches of
``__cluster_metadata`` and KRaft snapshots). kafka-clients ships these classes, so the tests
check this table against Kafka's own serializers (``tests/oracles/java/KafkaMessages.java``).
"""

from __future__ import annotations

from storage_core.record.messages.schema import F, message

CM = "clients/src/main/resources/common/message/"

CONSUMER_PROTOCOL_TOPIC_PARTITION = (
    F("Topic", "string", "0+", about="The topic name."),
    F("Partitions", "[]int32", "0+", about="The partitions."),
)

#: ConsumerProtocolSubscription.json: v1 OwnedPartitions, v2 GenerationId, v3 RackId.
CONSUMER_PROTOCOL_SUBSCRIPTION = message("ConsumerProtocolSubscription", None, "0-3", "none", (
    F("Topics", "[]string", "0+", about="The topics the member wants to consume."),
    F("UserData", "bytes", "0+", nullable="0+", about="User data passed back to the consumer."),
    F("OwnedPartitions", "[]TopicPartition", "1+", fields=CONSUMER_PROTOCOL_TOPIC_PARTITION,
      about="The partitions the member owns."),
    F("GenerationId", "int32", "2+", default=-1, about="The member's generation id."),
    F("RackId", "string", "3+", nullable="3+", about="The member's rack id."),
), source=CM + "ConsumerProtocolSubscription.json")

#: ConsumerProtocolAssignment.json: versions 0-3 share one layout.
CONSUMER_PROTOCOL_ASSIGNMENT = message("ConsumerProtocolAssignment", None, "0-3", "none", (
    F("AssignedPartitions", "[]TopicPartition", "0+", fields=CONSUMER_PROTOCOL_TOPIC_PARTITION,
      about="The partitions assigned to the consumer."),
    F("UserData", "bytes", "0+", nullable="0+", about="User data."),
), source=CM + "ConsumerProtocolAssignment.json")

VOTER = (
    F("VoterId", "int32", "0+", about="The voter's id."),
    F("VoterDirectoryId", "uuid", "1+", about="The voter's directory id (KIP-853)."),
)
#: LeaderChangeMessage.json (control type LEADER_CHANGE): v1 adds VoterDirectoryId.
LEADER_CHANGE_MESSAGE = message("LeaderChangeMessage", None, "0-1", "0+", (
    F("Version", "int16", "0+", about="The version of the leader change message."),
    F("LeaderId", "int32", "0+", about="The newly elected leader."),
    F("Voters", "[]Voter", "0+", fields=VOTER, about="The voters of the quorum in this epoch."),
    F("GrantingVoters", "[]Voter", "0+", fields=VOTER, about="The voters who voted for the leader."),
), source=CM + "LeaderChangeMessage.json")

#: SnapshotHeaderRecord.json (control type SNAPSHOT_HEADER).
SNAPSHOT_HEADER_RECORD = message("SnapshotHeaderRecord", None, "0", "0+", (
    F("Version", "int16", "0+", about="The version of the snapshot header record."),
    F("LastContainedLogTimestamp", "int64", "0+", about="The append time of the last record in the snapshot."),
), source=CM + "SnapshotHeaderRecord.json")

#: SnapshotFooterRecord.json (control type SNAPSHOT_FOOTER).
SNAPSHOT_FOOTER_RECORD = message("SnapshotFooterRecord", None, "0", "0+", (
    F("Version", "int16", "0+", about="The version of the snapshot footer record."),
), source=CM + "SnapshotFooterRecord.json")

#: KRaftVersionRecord.json (control type KRAFT_VERSION).
KRAFT_VERSION_RECORD = message("KRaftVersionRecord", None, "0", "0+", (
    F("Version", "int16", "0+", about="The version of the kraft version record."),
    F("KRaftVersion", "int16", "0+", about="The kraft protocol version."),
), source=CM + "KRaftVersionRecord.json")

#: VotersRecord.json (control type KRAFT_VOTERS).
VOTERS_RECORD = message("VotersRecord", None, "0", "0+", (
    F("Version", "int16", "0+", about="The version of the voters record."),
    F("Voters", "[]Voter", "0+", about="The voters of the quorum.", fields=(
        F("VoterId", "int32", "0+", about="The voter's replica id."),
        F("VoterDirectoryId", "uuid", "0+", about="The voter's directory id."),
        F("Endpoints", "[]Endpoint", "0+", about="The voter's endpoints.", fields=(
            F("Name", "string", "0+", about="The endpoint's listener name."),
            F("Host", "string", "0+", about="The hostname."),
            F("Port", "uint16", "0+", about="The port."),
        )),
        F("KRaftVersionFeature", "KRaftVersionFeature", "0+", about="The kraft versions the voter supports.", fields=(
            F("MinSupportedVersion", "int16", "0+", about="The minimum supported KRaft version."),
            F("MaxSupportedVersion", "int16", "0+", about="The maximum supported KRaft version."),
        )),
    )),
), source=CM + "VotersRecord.json")
