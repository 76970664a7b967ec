import { describe, expect, it } from "vitest";
import {
  assignToKeyGroup,
  checkMaxParallelism,
  keyGroupRangeForOperatorIndex,
  keyHashCode,
  operatorIndexForKeyGroup,
} from "./key-groups.js";

// Golden values computed by Java 17 with Flink's MathUtils.murmurHash and KeyGroupRangeAssignment
// copied verbatim: `murmurHash(key.hashCode()) % maxParallelism` for java.lang.String, Long, Double
// and Boolean keys. A change here moves every key to another key group: existing checkpoints would
// be read into the wrong subtasks.
const GOLDEN: ReadonlyArray<
  [key: string | number | bigint | boolean, hash: number, at128: number, at4096: number]
> = [
  ["a", 97, 81, 3025],
  ["b", 98, 22, 1174],
  ["user-42", -147182656, 20, 3732],
  ["", 0, 94, 2526],
  ["héllo", 103094734, 18, 3602],
  ["😀", 1772899, 54, 3254],
  ["a much longer key with spaces", 2141477059, 121, 2297],
  [0, 0, 94, 2526],
  [1, 1, 86, 4054],
  [-1, 0, 94, 2526],
  [123456789012, -1097262584, 123, 2939],
  [9007199254740991, -2097152, 73, 3273],
  [-9007199254740991, -2097151, 13, 2189],
  [1.5, 1073217536, 65, 833],
  [-0.25, -1076887552, 74, 1354],
  [Number.NaN, 2146959360, 41, 425],
  [Number.POSITIVE_INFINITY, 2146435072, 122, 250],
  [true, 1231, 77, 3533],
  [false, 1237, 3, 3331],
  [123456789012n, -1097262584, 123, 2939],
  [-1n, 0, 94, 2526],
];

describe("key groups", () => {
  it.each(GOLDEN)("%s hashes and falls into the key group Flink gives it", (key, hash, at128, at4096) => {
    expect(keyHashCode(key)).toBe(hash);
    expect(assignToKeyGroup(key, 128)).toBe(at128);
    expect(assignToKeyGroup(key, 4096)).toBe(at4096);
    expect(assignToKeyGroup(key, 1)).toBe(0);
  });

  it("hashes -0 as 0 and every NaN alike", () => {
    expect(keyHashCode(-0)).toBe(keyHashCode(0));
    const otherNaN = new Float64Array(new BigUint64Array([0x7ff0000000000001n]).buffer)[0]!;
    expect(keyHashCode(otherNaN)).toBe(keyHashCode(Number.NaN));
  });

  // [maxParallelism, parallelism, ranges of the first subtasks, [key group, owner] pairs], from
  // Flink's computeKeyGroupRangeForOperatorIndex and computeOperatorIndexForKeyGroup run in Java.
  const RANGES: ReadonlyArray<[number, number, Array<[number, number]>, Array<[number, number]>]> = [
    [
      128,
      1,
      [[0, 127]],
      [
        [0, 0],
        [64, 0],
        [127, 0],
      ],
    ],
    [
      128,
      2,
      [
        [0, 63],
        [64, 127],
      ],
      [
        [42, 0],
        [64, 1],
        [127, 1],
      ],
    ],
    [
      128,
      3,
      [
        [0, 42],
        [43, 85],
        [86, 127],
      ],
      [
        [42, 0],
        [64, 1],
        [127, 2],
      ],
    ],
    [
      128,
      4,
      [
        [0, 31],
        [32, 63],
        [64, 95],
        [96, 127],
      ],
      [
        [42, 1],
        [64, 2],
        [127, 3],
      ],
    ],
    [
      128,
      7,
      [
        [0, 18],
        [19, 36],
        [37, 54],
        [55, 73],
        [74, 91],
        [92, 109],
        [110, 127],
      ],
      [
        [42, 2],
        [64, 3],
        [127, 6],
      ],
    ],
    [
      128,
      128,
      [
        [0, 0],
        [1, 1],
        [2, 2],
      ],
      [
        [1, 1],
        [42, 42],
        [127, 127],
      ],
    ],
    [
      256,
      3,
      [
        [0, 85],
        [86, 170],
        [171, 255],
      ],
      [
        [85, 0],
        [128, 1],
        [255, 2],
      ],
    ],
    [
      4096,
      5,
      [
        [0, 819],
        [820, 1638],
        [1639, 2457],
        [2458, 3276],
        [3277, 4095],
      ],
      [
        [1365, 1],
        [2048, 2],
        [4095, 4],
      ],
    ],
    [
      10,
      3,
      [
        [0, 3],
        [4, 6],
        [7, 9],
      ],
      [
        [3, 0],
        [5, 1],
        [9, 2],
      ],
    ],
    [
      32768,
      100,
      [
        [0, 327],
        [328, 655],
        [656, 983],
        [984, 1310],
      ],
      [
        [10922, 33],
        [16384, 50],
        [32767, 99],
      ],
    ],
  ];

  it.each(RANGES)(
    "maxParallelism %i, parallelism %i: Flink's contiguous ranges and owners",
    (max, parallelism, ranges, owners) => {
      ranges.forEach(([start, end], index) => {
        expect(keyGroupRangeForOperatorIndex(max, parallelism, index)).toEqual({ start, end });
      });
      for (const [keyGroup, owner] of owners) {
        expect(operatorIndexForKeyGroup(max, parallelism, keyGroup)).toBe(owner);
      }
      // Every key group has exactly one owner, and it is the subtask whose range holds it.
      for (let keyGroup = 0; keyGroup < max; keyGroup++) {
        const owner = operatorIndexForKeyGroup(max, parallelism, keyGroup);
        const { start, end } = keyGroupRangeForOperatorIndex(max, parallelism, owner);
        expect(keyGroup >= start && keyGroup <= end).toBe(true);
      }
    },
  );

  it("refuses a maxParallelism out of bounds or below the parallelism", () => {
    expect(() => checkMaxParallelism(0, 1)).toThrow(/maxParallelism: must be a whole number from 1 to 32768/);
    expect(() => checkMaxParallelism(40_000, 1)).toThrow(/maxParallelism/);
    expect(() => checkMaxParallelism(4, 8)).toThrow(/parallelism: is 8, above maxParallelism 4/);
    expect(() => checkMaxParallelism(128, 128)).not.toThrow();
  });
});
