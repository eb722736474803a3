package dev.hyspec.bench;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.Sequence;
import dev.hyspec.sampling.Sampler;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * Prefill and decode throughput of the CPU backend on one or more checkpoint folders (batch 1).
 * Prints a table and writes JSON. Not a test: run it through {@code scripts/bench-cpu.sh}.
 *
 * <pre>
 * args: [--prompt N] [--decode N] [--repeats N] [--json FILE] CHECKPOINT_DIR...
 * </pre>
 */
public final class CpuBenchmark {
    record Result(String model, String architecture, int promptTokens, int decodeTokens,
                  double prefillTokensPerSecond, double decodeTokensPerSecond, double decodeStepMs) {}

    public static void main(String[] args) throws Exception {
        int prompt = 256;
        int decode = 128;
        int repeats = 5;
        Path json = Path.of("target/bench-cpu.json");
        List<Path> dirs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--prompt" -> prompt = Integer.parseInt(args[++i]);
                case "--decode" -> decode = Integer.parseInt(args[++i]);
                case "--repeats" -> repeats = Integer.parseInt(args[++i]);
                case "--json" -> json = Path.of(args[++i]);
                default -> dirs.add(Path.of(args[i]));
            }
        }
        if (dirs.isEmpty()) {
            System.err.println("usage: CpuBenchmark [--prompt N] [--decode N] [--repeats N] [--json FILE] CHECKPOINT_DIR...");
            System.exit(2);
        }
        List<Result> results = new ArrayList<>();
        for (Path dir : dirs) {
            results.add(run(dir, prompt, decode, repeats));
        }
        System.out.printf(Locale.ROOT, "%-14s %-22s %7s %7s %14s %14s %12s%n", "model", "architecture", "prompt",
                "decode", "prefill tok/s", "decode tok/s", "step ms");
        for (Result r : results) {
            System.out.printf(Locale.ROOT, "%-14s %-22s %7d %7d %14.1f %14.1f %12.3f%n", r.model(), r.architecture(),
                    r.promptTokens(), r.decodeTokens(), r.prefillTokensPerSecond(), r.decodeTokensPerSecond(),
                    r.decodeStepMs());
        }
        StringBuilder sb = new StringBuilder("{\"backend\":\"cpu\",\"cores\":")
                .append(Runtime.getRuntime().availableProcessors()).append(",\"vector_api\":")
                .append(ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent()).append(",\"results\":[");
        for (int i = 0; i < results.size(); i++) {
            Result r = results.get(i);
            sb.append(i == 0 ? "" : ",").append(String.format(Locale.ROOT,
                    "{\"model\":\"%s\",\"architecture\":\"%s\",\"prompt_tokens\":%d,\"decode_tokens\":%d,"
                            + "\"prefill_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.2f,\"decode_step_ms\":%.4f}",
                    r.model(), r.architecture(), r.promptTokens(), r.decodeTokens(), r.prefillTokensPerSecond(),
                    r.decodeTokensPerSecond(), r.decodeStepMs()));
        }
        sb.append("]}\n");
        Files.createDirectories(json.toAbsolutePath().getParent());
        Files.writeString(json, sb.toString());
        System.out.println("wrote " + json);
    }

    private static Result run(Path dir, int promptLen, int decodeLen, int repeats) {
        Backend backend = new CpuBackend();
        HybridModel model = HybridModel.load(Checkpoint.open(dir), backend);
        int vocab = model.config().vocabSize();
        int[] prompt = new Random(7).ints(promptLen, 0, vocab).toArray();
        double[] prefill = new double[repeats];
        double[] decode = new double[repeats];
        for (int r = -1; r < repeats; r++) {         // r = -1 warms up the JIT
            long t0;
            long t1;
            long t2;
            try (Sequence seq = model.newSequence(promptLen + decodeLen)) {
                t0 = System.nanoTime();
                float[] logits = backend.download(seq.forward(prompt, false));
                t1 = System.nanoTime();
                int next = Sampler.argmax(logits);
                for (int i = 0; i < decodeLen; i++) {
                    next = Sampler.argmax(backend.download(seq.forward(new int[] {next}, false)));
                }
                t2 = System.nanoTime();
            }
            if (r >= 0) {
                prefill[r] = promptLen / ((t1 - t0) / 1e9);
                decode[r] = decodeLen / ((t2 - t1) / 1e9);
            }
        }
        double decodeTps = median(decode);
        return new Result(dir.getFileName().toString(), model.config().architecture().hfName(), promptLen, decodeLen,
                median(prefill), decodeTps, 1000.0 / decodeTps);
    }


    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }
}
