package flinktune.bench;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimitedSourceReader;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.connector.datagen.source.GeneratingIteratorSourceReader;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * An unbounded, paced event source (FLIP-27) whose rate follows a rate file.
 *
 * <p>Splits and their checkpointed progress come from a {@link NumberSequenceSource} cut into
 * {@link #SPLITS} pieces regardless of the parallelism at first start: with one split per
 * subtask (the stock data generator) a source scaled up later leaves its new readers without a
 * split and the total rate falls.
 */
public final class PacedSource
        implements Source<Tuple3<Long, Long, Long>, NumberSequenceSplit, Collection<NumberSequenceSplit>>,
                ResultTypeQueryable<Tuple3<Long, Long, Long>> {
    static final int SPLITS = 16;

    private final String rateFile;
    private final double initialRate;
    private final int keys;
    private final ManySplits sequence = new ManySplits();

    public PacedSource(String rateFile, double initialRate, int keys) {
        this.rateFile = rateFile;
        this.initialRate = initialRate;
        this.keys = keys;
    }

    /** The number sequence cut into at least {@link #SPLITS} splits. */
    static final class ManySplits extends NumberSequenceSource {
        ManySplits() {
            super(0, Long.MAX_VALUE - 1);
        }

        @Override
        protected List<NumberSequenceSplit> splitNumberRange(long from, long to, int numSplits) {
            return new ArrayList<>(super.splitNumberRange(from, to, Math.max(SPLITS, numSplits)));
        }
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SourceReader<Tuple3<Long, Long, Long>, NumberSequenceSplit> createReader(SourceReaderContext ctx) {
        Pace pace = new Pace(rateFile, initialRate, ctx.currentParallelism());
        return new RateLimitedSourceReader<>(
                new GeneratingIteratorSourceReader<>(ctx, new EventGenerator(keys, pace)), new PaceLimiter(pace));
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> createEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> ctx) {
        return sequence.createEnumerator(ctx);
    }

    @Override
    public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> restoreEnumerator(
            SplitEnumeratorContext<NumberSequenceSplit> ctx, Collection<NumberSequenceSplit> checkpoint) {
        return sequence.restoreEnumerator(ctx, checkpoint);
    }

    @Override
    public SimpleVersionedSerializer<NumberSequenceSplit> getSplitSerializer() {
        return sequence.getSplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<Collection<NumberSequenceSplit>> getEnumeratorCheckpointSerializer() {
        return sequence.getEnumeratorCheckpointSerializer();
    }

    @Override
    public TypeInformation<Tuple3<Long, Long, Long>> getProducedType() {
        return Types.TUPLE(Types.LONG, Types.LONG, Types.LONG);
    }
}
