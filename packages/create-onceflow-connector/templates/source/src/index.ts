// The public API of __PACKAGE_NAME__: everything users import is exported here.
export type { RedisClient, RedisStreamSplit, RedisStreamsSourceOptions } from "./redis-streams-source.js";
export { RedisStreamsReader, RedisStreamsSource } from "./redis-streams-source.js";
