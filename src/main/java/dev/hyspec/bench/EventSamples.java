package dev.hyspec.bench;

import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.backend.cuda.EventTimer;

/**
 * The device-time sampling of the GPU benchmarks: each sample is {@code perSample} calls queued
 * behind {@code fillers} device copies (between two large buffers, alternating direction) that take
 * longer than issuing the calls, and timed by CUDA events around the calls alone. A sample is
 * host-bound when the device reached the start mark before the last call was issued.
 */
final class EventSamples {
    /** Median device µs per call, calls made, and whether most samples were host-bound. */
    record Timed(double medianUs, int runs, boolean hostBound) {}

    private EventSamples() {}

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
        return new Timed(StateUpdateBench.median(us), samples * perSample, 2 * hostBound > samples);
    }
}
