package dev.hyspec.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.backend.cuda.EventTimer;
import java.time.Instant;
import java.util.Arrays;

/** What the GPU microbenchmarks ({@link StateUpdateBench}, {@link MatmulBench}) share. */
final class GpuBench {
    /** Median device µs per call, calls made, and whether most samples were host-bound. */
    record Timed(double medianUs, int runs, boolean hostBound) {}

    private GpuBench() {}

    /**
     * Median milliseconds of a single device copy between two large buffers ({@code runs} copies,
     * alternating direction, each timed by events), after one warm-up copy each way.
     */
    static double copyMillis(CudaBackend gpu, EventTimer timer, Tensor a, Tensor b, int runs) {
        gpu.copy(a, b);
        gpu.copy(b, a);
        double[] ms = new double[runs];
        for (int i = 0; i < ms.length; i++) {
            timer.start();
            gpu.copy(i % 2 == 0 ? a : b, i % 2 == 0 ? b : a);
            ms[i] = timer.stopMillis();
        }
        return median(ms);
    }

    /**
     * Device-time samples: each is {@code perSample} calls queued behind {@code fillers} device copies
     * (between two large buffers, alternating direction) that take longer than issuing the calls,
     * timed by CUDA events around the calls alone. A sample is host-bound when the device reached
     * the start mark before the last call was issued.
     */
    static Timed sample(CudaBackend gpu, EventTimer timer, Runnable call, Tensor copyA, Tensor copyB, int samples,
                        int perSample, int fillers) {
        double[] us = new double[samples];
        int hostBound = 0;
        for (int s = 0; s < samples; s++) {
            for (int f = 0; f < fillers; f++) {
                boolean forward = (s + f) % 2 == 0;
                gpu.copy(forward ? copyA : copyB, forward ? copyB : copyA);
            }
            timer.start();
            for (int i = 0; i < perSample; i++) {
                call.run();
            }
            if (!timer.startPending()) {
                hostBound++;
            }
            us[s] = timer.stopMillis() * 1e3 / perSample;
        }
        return new Timed(median(us), samples * perSample, 2 * hostBound > samples);
    }

    static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    static double round(double v, int digits) {
        double scale = Math.pow(10, digits);
        return Math.round(v * scale) / scale;
    }

    /** A result file's root: the machine, the date, the run's size, the measured copy bandwidth. */
    static ObjectNode jsonRoot(ObjectMapper json, CudaBackend gpu, boolean quick, double bandwidth, double seconds) {
        ObjectNode root = json.createObjectNode();
        ObjectNode machine = root.putObject("machine");
        machine.put("gpu", gpu.deviceName());
        String driver = System.getProperty("hyspec.bench.driver", "").trim();
        machine.put("driver", (driver.isEmpty() ? "" : driver + ", ") + "CUDA " + gpu.driverVersion());
        root.put("date", Instant.now().toString());
        root.put("quick", quick);
        root.put("copyBandwidthGBs", round(bandwidth / 1e9, 1));
        root.put("runSeconds", round(seconds, 1));
        return root;
    }
}
