package dev.hyspec.bench;

import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.bench.DecodeRun.Measured;
import dev.hyspec.bench.DecodeRun.Mode;
import dev.hyspec.bench.DecodeRun.Workload;
import dev.hyspec.model.HybridModel;
import dev.hyspec.state.ReplayStrategy;
import java.util.Arrays;

/**
 * Whether greedy decoding with drafts reproduces greedy decoding without them on a generated model
 * (GPU, bf16): two no-spec runs of the same prompts (run-to-run determinism), then replay with the
 * first run's outputs as drafts, with the default kernels and with the generic Mamba2 replay-verify
 * kernel forced. Prints each run's acceptance and the first position where a request's output parts
 * from the first run's.
 *
 * <pre>args: [model] [batch]   (default nemotron-h-8b 1)</pre>
 */
public final class SpecConsistency {
    private SpecConsistency() {}

    public static void main(String[] args) {
        String name = args.length > 0 ? args[0] : "nemotron-h-8b";
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 1;
        Workload w = new Workload(64, 16, 64);
        try (CudaBackend backend = new CudaBackend(CudaBackend.Precision.BF16)) {
            HybridModel model = HybridModel.generate(DecodeBench.config(name), backend, 20_250_707L);
            Measured first = DecodeRun.run(model, batch, Mode.NO_SPEC, w, 7, null);
            Measured second = DecodeRun.run(model, batch, Mode.NO_SPEC, w, 7, null);
            report("no-spec again", first, second);
            Mode replay = Mode.spec(ReplayStrategy.ID, DecodeBench.NUM_DRAFTS);
            report("replay, default kernels", first, DecodeRun.run(model, batch, replay, w, 7, first.outputs()));
            System.setProperty("hyspec.mamba2.verify-kernel", "generic");
            report("replay, generic mamba2 verify", first, DecodeRun.run(model, batch, replay, w, 7, first.outputs()));
            System.clearProperty("hyspec.mamba2.verify-kernel");
        }
    }

    private static void report(String what, Measured reference, Measured m) {
        int[] parts = new int[m.outputs().length];
        for (int r = 0; r < parts.length; r++) {
            int[] a = reference.outputs()[r];
            int[] b = m.outputs()[r];
            int i = 0;
            while (i < a.length && a[i] == b[i]) {
                i++;
            }
            parts[r] = i;
        }
        System.out.printf("%-32s acceptance %.3f, first differing position per request %s%n", what,
                m.acceptanceRate(), Arrays.toString(parts));
    }
}
