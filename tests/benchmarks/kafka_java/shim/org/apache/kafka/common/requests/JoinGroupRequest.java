package org.apache.kafka.common.requests;
/** Harness shim: the two constants ConsumerGroupMetadata reads (values as in Kafka 3.8.0). */
public final class JoinGroupRequest {
    public static final String UNKNOWN_MEMBER_ID = "";
    public static final int UNKNOWN_GENERATION_ID = -1;
    private JoinGroupRequest() { }
}
