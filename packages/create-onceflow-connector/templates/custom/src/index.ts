// The public API of __PACKAGE_NAME__: everything users import is exported here.
export type { __SINK_CLASS__Options, __SINK_CLASS__Transaction } from "./__SINK_FILE__.js";
export { __SINK_CLASS__, listStagedFiles, readCommitted } from "./__SINK_FILE__.js";
