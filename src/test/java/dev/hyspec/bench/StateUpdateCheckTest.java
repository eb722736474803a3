package dev.hyspec.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.bench.StateWorkload.Op;
import org.junit.jupiter.api.Test;

/**
 * The state-update benchmark's plumbing on the CPU: the spot check passes a backend against itself
 * for every operation it times, rows rotate through a step, and the floors follow DESIGN I3/I4.
 */
class StateUpdateCheckTest {
    @Test
    void everyTimedOperationChecksCleanAgainstItself() {
        try (CpuBackend a = new CpuBackend(); CpuBackend b = new CpuBackend()) {
            RandomPool random = new RandomPool(1, 1 << 16);
            for (StateUpdateBench.Case c : StateUpdateBench.CASES) {
                for (Op op : c.ops()) {
                    StateUpdateCheck.Result r = StateUpdateCheck.run(c.workload(), op, c.layout(), op == Op.DECODE ? 1 : 4,
                            a, b, random);
                    assertEquals(0.0, r.relativeError(), r.toString());
                    assertTrue(r.passed());
                }
            }
        }
    }

    @Test
    void rowsRunEveryOperation() {
        try (CpuBackend cpu = new CpuBackend()) {
            StateWorkload w = StateWorkload.GDN_QWEN35;
            RandomPool random = new RandomPool(2, 1 << 16);
            Tensor template = cpu.upload(random.take((int) w.stateElements(), 0.5f), w.stateShape(StateLayout.KV));
            Tensor[] params = {cpu.upload(random.take(w.paramHeads()), w.paramHeads()),
                cpu.upload(random.take(w.paramHeads()), w.paramHeads())};
            StateRows rows = new StateRows(w, cpu, StateLayout.KV, 2, 6, true, template);
            rows.setTokens(4, random);
            w.primeHistory(rows, params);
            float[] before = cpu.download(rows.states()[1]);
            for (Op op : Op.values()) {
                w.run(op, rows, params);
            }
            float[] after = cpu.download(rows.states()[1]);
            assertTrue(StateUpdateCheck.relativeError(before, after) > 1e-3, "the state advanced");
            rows.free();
        }
    }

    @Test
    void floorsCountStateTrafficPerRow() {
        StateWorkload w = StateWorkload.MAMBA2_8B;
        long s = 4L * 128 * 64 * 128;
        assertEquals(s, 4 * w.stateElements());
        long tokens = 4L * 4 * (10240 + 128 + 8192);   // xBC, dtRaw and y of 4 tokens
        long history = 4L * 4 * (8192 + 1024 + 256);
        assertEquals(32 * (2 * s + tokens + 2 * history), w.floorBytes(Op.REPLAY, 4, 32));
        assertEquals(32 * (5 * s + 2 * s + tokens), w.floorBytes(Op.INTERMEDIATE_COPY, 4, 32));
        assertEquals(2 * s + 4L * (10240 + 128 + 8192), w.floorBytes(Op.DECODE, 1, 1));
    }
}
