export type { KafkaTransactionInfo, ListKafkaTransactionsOptions } from "./admin/kafka-transactions.js";
export { abortKafkaTransactions, listKafkaTransactions } from "./admin/kafka-transactions.js";
export type { KafkaCompressionDetails } from "./errors/kafka-compression-error.js";
export { KafkaCompressionError } from "./errors/kafka-compression-error.js";
export type { KafkaDeliveryTimeoutDetails } from "./errors/kafka-delivery-timeout-error.js";
export { KafkaDeliveryTimeoutError } from "./errors/kafka-delivery-timeout-error.js";
export type { KafkaRecordRejectedDetails } from "./errors/kafka-record-rejected-error.js";
export { KafkaRecordRejectedError } from "./errors/kafka-record-rejected-error.js";
export { KafkaPrefixClaimedError } from "./errors/prefix-claimed-error.js";
export type { KafkaRepartitionExchangeOptions } from "./exchange/kafka-repartition-exchange.js";
export { kafkaRepartitionExchange, repartitionTopicName } from "./exchange/kafka-repartition-exchange.js";
export type { RepartitionCodec } from "./exchange/repartition-records.js";
export type { ClientOptions as KafkaClientOptions } from "./internal/client.js";
export type { SocketFactory as KafkaSocketFactory } from "./internal/kafkajs/response-socket.js";
export { responseSocketFactory } from "./internal/kafkajs/response-socket.js";
export type { CompressionType } from "./protocol/compression/compression-codec.js";
export { KafkaSink } from "./sink/kafka-sink.js";
export type {
  DeliveryGuarantee,
  KafkaSinkHeaders,
  KafkaSinkOptions,
  PartitionerInput,
} from "./sink/kafka-sink-options.js";
export type { KafkaTransaction } from "./sink/kafka-transaction.js";
export type { KafkaProducerSettings } from "./sink/producer-settings.js";
export type { Serializer } from "./sink/serializer.js";
export { Serializers } from "./sink/serializer.js";
export type { DeserializationContext, Deserializer } from "./source/deserializer.js";
export { Deserializers } from "./source/deserializer.js";
export type { KafkaPartitionSplit, PendingStart } from "./source/kafka-partition-split.js";
export type { KafkaHeader, KafkaRecord } from "./source/kafka-record.js";
export { kafkaRecordSerializer } from "./source/kafka-record-serializer.js";
export { KafkaSource } from "./source/kafka-source.js";
export type {
  DeserializationErrorPolicy,
  KafkaSourceOptions,
  OffsetResetStrategy,
  PartitionOffset,
  StartingOffsets,
  StoppingOffsets,
} from "./source/kafka-source-options.js";
export { KafkaSourceReader } from "./source/kafka-source-reader.js";
export type { MissingPartitionPolicy } from "./source/missing-partitions.js";
export { MissingPartitionMetricNames } from "./source/missing-partitions.js";
