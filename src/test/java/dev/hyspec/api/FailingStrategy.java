package dev.hyspec.api;

import dev.hyspec.backend.Tensor;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.RecurrentOps;
import dev.hyspec.state.RecurrentRow;
import dev.hyspec.state.ReplayStrategy;
import dev.hyspec.state.RollbackStrategy;
import io.smallrye.common.annotation.Identifier;
import io.quarkus.arc.lookup.LookupIfProperty;
import jakarta.enterprise.context.ApplicationScoped;

/**
 * A test strategy that works as {@code replay} for a request's first few commits, then throws: an
 * engine failure in the middle of a stream. Only {@link MidStreamErrorTest}'s profile sets the
 * property that makes the engine find it.
 */
@LookupIfProperty(name = "hyspec-test.failing-strategy", stringValue = "true")
@ApplicationScoped
@Identifier(FailingStrategy.ID)
public class FailingStrategy implements RollbackStrategy {
    static final String ID = "failing-after-5";
    private final ReplayStrategy replay = new ReplayStrategy();
    private final java.util.Map<Integer, Integer> commits = new java.util.concurrent.ConcurrentHashMap<>();

    @Override
    public String id() {
        return ID;
    }

    @Override
    public void verify(MambaStatePool pool, int slot, RecurrentOps ops, RecurrentRow row, Tensor y) {
        replay.verify(pool, slot, ops, row, y);
    }

    @Override
    public void snapshot(MambaStatePool pool, int slot, RecurrentOps[] layers, int tokens, int target) {
        replay.snapshot(pool, slot, layers, tokens, target);
    }

    @Override
    public void commit(MambaStatePool pool, int slot, RecurrentOps[] layers, int accepted) {
        if (commits.merge(slot, 1, Integer::sum) > 5) {
            commits.remove(slot);
            throw new IllegalStateException("injected failure after 5 commits");
        }
        replay.commit(pool, slot, layers, accepted);
    }

    @Override
    public void copyCommitted(MambaStatePool pool, int slot, RecurrentOps[] layers, int target) {
        replay.copyCommitted(pool, slot, layers, target);
    }

    @Override
    public void settle(MambaStatePool pool, int slot, RecurrentOps[] layers) {
        replay.settle(pool, slot, layers);
    }
}
