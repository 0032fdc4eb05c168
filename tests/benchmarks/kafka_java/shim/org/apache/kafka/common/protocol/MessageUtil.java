package org.apache.kafka.common.protocol;
/** Harness shim: the two constants Struct imports (values as in Kafka 3.8.0; the rest needs Jackson). */
public final class MessageUtil {
    public static final long UNSIGNED_INT_MAX = 4294967295L;
    public static final int UNSIGNED_SHORT_MAX = 65535;
    private MessageUtil() { }
}
