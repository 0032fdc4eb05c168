package org.apache.kafka.common.record;
/** Harness shim: the record classes are not used by the assignors (only Type's RECORDS fields name them). */
public abstract class BaseRecords {
    public abstract int sizeInBytes();
}
