/*
 * ember_beagle.h - the C interface of BEAGLE 3.1 (libhmsbeagle.so.1), as
 * libember-beagle implements it on ember's plf accelerator: the same
 * function signatures, struct layouts and constant values, so that a
 * program built against BEAGLE 3.1 (Debian's MrBayes) runs on ember with
 * this library in place of libhmsbeagle. Written for ember; the values are
 * BEAGLE's public interface, which tests/conformance/beagle_header_check.c
 * checks against the system's libhmsbeagle/beagle.h at compile time.
 *
 * Constants, enums and struct fields are given as X-macro lists: the lists
 * define them here, and the header check expands them again to compare each
 * one with BEAGLE's. A translation unit that defines
 * EMBER_BEAGLE_CHECK_NAMES before including this file gets every type and
 * constant under an ember_check_ prefix, so that it can include BEAGLE's
 * own header too; the prototypes keep BEAGLE's type names and so must
 * agree with BEAGLE's declarations, or the compiler stops.
 */
#ifndef EMBER_BEAGLE_H
#define EMBER_BEAGLE_H

#ifdef __cplusplus
extern "C" {
#endif

#ifdef EMBER_BEAGLE_CHECK_NAMES
#define EMBER_BEAGLE_NAME(n) ember_check_##n
#else
#define EMBER_BEAGLE_NAME(n) n
#endif

#define EMBER_BEAGLE_ENUMERATOR(name, value) EMBER_BEAGLE_NAME(name) = (value),
#define EMBER_BEAGLE_FIELD(type, name) type name;

#ifndef EMBER_BEAGLE_EXPORT
#define EMBER_BEAGLE_EXPORT __attribute__((visibility("default")))
#endif

/* Return codes: 0, or a negative error. */
#define EMBER_BEAGLE_RETURN_CODES(X)                                        \
  X(BEAGLE_SUCCESS, 0)                                                      \
  X(BEAGLE_ERROR_GENERAL, -1)                                               \
  X(BEAGLE_ERROR_OUT_OF_MEMORY, -2)                                         \
  X(BEAGLE_ERROR_UNIDENTIFIED_EXCEPTION, -3)                                \
  X(BEAGLE_ERROR_UNINITIALIZED_INSTANCE, -4) /* no such instance */         \
  X(BEAGLE_ERROR_OUT_OF_RANGE, -5)           /* an index past its buffers */ \
  X(BEAGLE_ERROR_NO_RESOURCE, -6)                                           \
  X(BEAGLE_ERROR_NO_IMPLEMENTATION, -7)                                     \
  X(BEAGLE_ERROR_FLOATING_POINT, -8)         /* a log-likelihood not finite */

/* Instance and resource flags (preferences, requirements, details). */
#define EMBER_BEAGLE_FLAGS(X)                                               \
  X(BEAGLE_FLAG_PRECISION_SINGLE, 1 << 0)                                  \
  X(BEAGLE_FLAG_PRECISION_DOUBLE, 1 << 1)                                  \
  X(BEAGLE_FLAG_COMPUTATION_SYNCH, 1 << 2)                                 \
  X(BEAGLE_FLAG_COMPUTATION_ASYNCH, 1 << 3)                                \
  X(BEAGLE_FLAG_EIGEN_REAL, 1 << 4)                                        \
  X(BEAGLE_FLAG_EIGEN_COMPLEX, 1 << 5)                                     \
  X(BEAGLE_FLAG_SCALING_MANUAL, 1 << 6)                                    \
  X(BEAGLE_FLAG_SCALING_AUTO, 1 << 7)                                      \
  X(BEAGLE_FLAG_SCALING_ALWAYS, 1 << 8)                                    \
  X(BEAGLE_FLAG_SCALING_DYNAMIC, 1 << 25)                                  \
  X(BEAGLE_FLAG_SCALERS_RAW, 1 << 9)                                       \
  X(BEAGLE_FLAG_SCALERS_LOG, 1 << 10)                                      \
  X(BEAGLE_FLAG_INVEVEC_STANDARD, 1 << 20)                                 \
  X(BEAGLE_FLAG_INVEVEC_TRANSPOSED, 1 << 21)                               \
  X(BEAGLE_FLAG_VECTOR_SSE, 1 << 11)                                       \
  X(BEAGLE_FLAG_VECTOR_AVX, 1 << 24)                                       \
  X(BEAGLE_FLAG_VECTOR_NONE, 1 << 12)                                      \
  X(BEAGLE_FLAG_THREADING_CPP, 1 << 30)                                    \
  X(BEAGLE_FLAG_THREADING_OPENMP, 1 << 13)                                 \
  X(BEAGLE_FLAG_THREADING_NONE, 1 << 14)                                   \
  X(BEAGLE_FLAG_PROCESSOR_CPU, 1 << 15)                                    \
  X(BEAGLE_FLAG_PROCESSOR_GPU, 1 << 16)                                    \
  X(BEAGLE_FLAG_PROCESSOR_FPGA, 1 << 17)                                   \
  X(BEAGLE_FLAG_PROCESSOR_CELL, 1 << 18)                                   \
  X(BEAGLE_FLAG_PROCESSOR_PHI, 1 << 19)                                    \
  X(BEAGLE_FLAG_PROCESSOR_OTHER, 1 << 26)                                  \
  X(BEAGLE_FLAG_FRAMEWORK_CUDA, 1 << 22)                                   \
  X(BEAGLE_FLAG_FRAMEWORK_OPENCL, 1 << 23)                                 \
  X(BEAGLE_FLAG_FRAMEWORK_CPU, 1 << 27)                                    \
  X(BEAGLE_FLAG_PARALLELOPS_STREAMS, 1 << 28)                              \
  X(BEAGLE_FLAG_PARALLELOPS_GRID, 1 << 29)

/* What beagleGetBenchmarkedResourceList measures. */
#define EMBER_BEAGLE_BENCHMARK_FLAGS(X)                                     \
  X(BEAGLE_BENCHFLAG_SCALING_NONE, 1 << 0)                                  \
  X(BEAGLE_BENCHFLAG_SCALING_ALWAYS, 1 << 1)                                \
  X(BEAGLE_BENCHFLAG_SCALING_DYNAMIC, 1 << 2)

/* Operation sizes (ints per operation) and "no buffer". */
#define EMBER_BEAGLE_OP_CODES(X)                                            \
  X(BEAGLE_OP_COUNT, 7)                                                     \
  X(BEAGLE_PARTITION_OP_COUNT, 9)                                           \
  X(BEAGLE_OP_NONE, -1)

enum EMBER_BEAGLE_NAME(BeagleReturnCodes) {
  EMBER_BEAGLE_RETURN_CODES(EMBER_BEAGLE_ENUMERATOR)
};
enum EMBER_BEAGLE_NAME(BeagleFlags) {
  EMBER_BEAGLE_FLAGS(EMBER_BEAGLE_ENUMERATOR)
};
enum EMBER_BEAGLE_NAME(BeagleBenchmarkFlags) {
  EMBER_BEAGLE_BENCHMARK_FLAGS(EMBER_BEAGLE_ENUMERATOR)
};
enum EMBER_BEAGLE_NAME(BeagleOpCodes) {
  EMBER_BEAGLE_OP_CODES(EMBER_BEAGLE_ENUMERATOR)
};

/* An instance's details, filled by beagleCreateInstance: the resource it
 * runs on, its name, the implementation and the flags in effect. The
 * strings belong to the library. */
#define EMBER_BEAGLE_INSTANCE_DETAILS_FIELDS(X)                             \
  X(int, resourceNumber)                                                    \
  X(char *, resourceName)                                                   \
  X(char *, implName)                                                       \
  X(char *, implDescription)                                                \
  X(long, flags)

/* One resource (beagleGetResourceList). */
#define EMBER_BEAGLE_RESOURCE_FIELDS(X)                                     \
  X(char *, name)                                                           \
  X(char *, description)                                                    \
  X(long, supportFlags)                                                     \
  X(long, requiredFlags)

#define EMBER_BEAGLE_RESOURCE_LIST_FIELDS(X)                                \
  X(EMBER_BEAGLE_NAME(BeagleResource) *, list)                              \
  X(int, length)

/* One resource with its benchmark (beagleGetBenchmarkedResourceList). */
#define EMBER_BEAGLE_BENCHMARKED_RESOURCE_FIELDS(X)                         \
  X(int, number)                                                            \
  X(char *, name)                                                           \
  X(char *, description)                                                    \
  X(long, supportFlags)                                                     \
  X(long, requiredFlags)                                                    \
  X(int, returnCode)                                                        \
  X(char *, implName)                                                       \
  X(long, benchedFlags)                                                     \
  X(double, benchmarkResult)   /* milliseconds */                           \
  X(double, performanceRatio)  /* against the first CPU resource */

#define EMBER_BEAGLE_BENCHMARKED_RESOURCE_LIST_FIELDS(X)                    \
  X(EMBER_BEAGLE_NAME(BeagleBenchmarkedResource) *, list)                   \
  X(int, length)

/* One partials update: destination = (M1 child1) .* (M2 child2), with its
 * scale buffer to write, or the one to divide by. */
#define EMBER_BEAGLE_OPERATION_FIELDS(X)                                    \
  X(int, destinationPartials)                                               \
  X(int, destinationScaleWrite)                                             \
  X(int, destinationScaleRead)                                              \
  X(int, child1Partials)                                                    \
  X(int, child1TransitionMatrix)                                            \
  X(int, child2Partials)                                                    \
  X(int, child2TransitionMatrix)

/* The same on one partition's patterns, with its own cumulative buffer. */
#define EMBER_BEAGLE_OPERATION_BY_PARTITION_FIELDS(X)                       \
  EMBER_BEAGLE_OPERATION_FIELDS(X)                                          \
  X(int, partition)                                                         \
  X(int, cumulativeScaleIndex)

typedef struct {
  EMBER_BEAGLE_INSTANCE_DETAILS_FIELDS(EMBER_BEAGLE_FIELD)
} EMBER_BEAGLE_NAME(BeagleInstanceDetails);
typedef struct {
  EMBER_BEAGLE_RESOURCE_FIELDS(EMBER_BEAGLE_FIELD)
} EMBER_BEAGLE_NAME(BeagleResource);
typedef struct {
  EMBER_BEAGLE_RESOURCE_LIST_FIELDS(EMBER_BEAGLE_FIELD)
} EMBER_BEAGLE_NAME(BeagleResourceList);
typedef struct {
  EMBER_BEAGLE_BENCHMARKED_RESOURCE_FIELDS(EMBER_BEAGLE_FIELD)
} EMBER_BEAGLE_NAME(BeagleBenchmarkedResource);
typedef struct {
  EMBER_BEAGLE_BENCHMARKED_RESOURCE_LIST_FIELDS(EMBER_BEAGLE_FIELD)
} EMBER_BEAGLE_NAME(BeagleBenchmarkedResourceList);
typedef struct {
  EMBER_BEAGLE_OPERATION_FIELDS(EMBER_BEAGLE_FIELD)
} EMBER_BEAGLE_NAME(BeagleOperation);
typedef struct {
  EMBER_BEAGLE_OPERATION_BY_PARTITION_FIELDS(EMBER_BEAGLE_FIELD)
} EMBER_BEAGLE_NAME(BeagleOperationByPartition);

/* ---- the functions ------------------------------------------------------
 * Every function returns a code above (or an instance number, a string, a
 * list). See client/beagle/README.md for what ember implements of each. */

/* Library */
EMBER_BEAGLE_EXPORT const char *beagleGetVersion(void);
EMBER_BEAGLE_EXPORT const char *beagleGetCitation(void);
EMBER_BEAGLE_EXPORT BeagleResourceList *beagleGetResourceList(void);
EMBER_BEAGLE_EXPORT BeagleBenchmarkedResourceList *
beagleGetBenchmarkedResourceList(int tipCount, int compactBufferCount,
                                 int stateCount, int patternCount,
                                 int categoryCount, int *resourceList,
                                 int resourceCount, long preferenceFlags,
                                 long requirementFlags, int eigenModelCount,
                                 int partitionCount, int calculateDerivatives,
                                 long benchmarkFlags);
EMBER_BEAGLE_EXPORT int beagleFinalize(void);

/* Instances */
EMBER_BEAGLE_EXPORT int beagleCreateInstance(
    int tipCount, int partialsBufferCount, int compactBufferCount,
    int stateCount, int patternCount, int eigenBufferCount,
    int matrixBufferCount, int categoryCount, int scaleBufferCount,
    int *resourceList, int resourceCount, long preferenceFlags,
    long requirementFlags, BeagleInstanceDetails *returnInfo);
EMBER_BEAGLE_EXPORT int beagleFinalizeInstance(int instance);
EMBER_BEAGLE_EXPORT int beagleSetCPUThreadCount(int instance,
                                                int threadCount);

/* Data */
EMBER_BEAGLE_EXPORT int beagleSetTipStates(int instance, int tipIndex,
                                           const int *inStates);
EMBER_BEAGLE_EXPORT int beagleSetTipPartials(int instance, int tipIndex,
                                             const double *inPartials);
EMBER_BEAGLE_EXPORT int beagleSetPartials(int instance, int bufferIndex,
                                          const double *inPartials);
EMBER_BEAGLE_EXPORT int beagleGetPartials(int instance, int bufferIndex,
                                          int scaleIndex,
                                          double *outPartials);
EMBER_BEAGLE_EXPORT int beagleSetEigenDecomposition(
    int instance, int eigenIndex, const double *inEigenVectors,
    const double *inInverseEigenVectors, const double *inEigenValues);
EMBER_BEAGLE_EXPORT int beagleSetStateFrequencies(
    int instance, int stateFrequenciesIndex,
    const double *inStateFrequencies);
EMBER_BEAGLE_EXPORT int beagleSetCategoryWeights(
    int instance, int categoryWeightsIndex, const double *inCategoryWeights);
EMBER_BEAGLE_EXPORT int beagleSetCategoryRates(int instance,
                                               const double *inCategoryRates);
EMBER_BEAGLE_EXPORT int beagleSetCategoryRatesWithIndex(
    int instance, int categoryRatesIndex, const double *inCategoryRates);
EMBER_BEAGLE_EXPORT int beagleSetPatternWeights(
    int instance, const double *inPatternWeights);
EMBER_BEAGLE_EXPORT int beagleSetPatternPartitions(
    int instance, int partitionCount, const int *inPatternPartitions);

/* Transition matrices */
EMBER_BEAGLE_EXPORT int beagleConvolveTransitionMatrices(
    int instance, const int *firstIndices, const int *secondIndices,
    const int *resultIndices, int matrixCount);
EMBER_BEAGLE_EXPORT int beagleUpdateTransitionMatrices(
    int instance, int eigenIndex, const int *probabilityIndices,
    const int *firstDerivativeIndices, const int *secondDerivativeIndices,
    const double *edgeLengths, int count);
EMBER_BEAGLE_EXPORT int beagleUpdateTransitionMatricesWithMultipleModels(
    int instance, const int *eigenIndices, const int *categoryRateIndices,
    const int *probabilityIndices, const int *firstDerivativeIndices,
    const int *secondDerivativeIndices, const double *edgeLengths,
    int count);
EMBER_BEAGLE_EXPORT int beagleSetTransitionMatrix(int instance,
                                                  int matrixIndex,
                                                  const double *inMatrix,
                                                  double paddedValue);
EMBER_BEAGLE_EXPORT int beagleGetTransitionMatrix(int instance,
                                                  int matrixIndex,
                                                  double *outMatrix);
EMBER_BEAGLE_EXPORT int beagleSetTransitionMatrices(
    int instance, const int *matrixIndices, const double *inMatrices,
    const double *paddedValues, int count);

/* Partials */
EMBER_BEAGLE_EXPORT int beagleUpdatePartials(const int instance,
                                             const BeagleOperation *operations,
                                             int operationCount,
                                             int cumulativeScaleIndex);
EMBER_BEAGLE_EXPORT int beagleUpdatePartialsByPartition(
    const int instance, const BeagleOperationByPartition *operations,
    int operationCount);
EMBER_BEAGLE_EXPORT int beagleWaitForPartials(const int instance,
                                              const int *destinationPartials,
                                              int destinationPartialsCount);

/* Scale factors */
EMBER_BEAGLE_EXPORT int beagleAccumulateScaleFactors(int instance,
                                                     const int *scaleIndices,
                                                     int count,
                                                     int cumulativeScaleIndex);
EMBER_BEAGLE_EXPORT int beagleAccumulateScaleFactorsByPartition(
    int instance, const int *scaleIndices, int count,
    int cumulativeScaleIndex, int partitionIndex);
EMBER_BEAGLE_EXPORT int beagleRemoveScaleFactors(int instance,
                                                 const int *scaleIndices,
                                                 int count,
                                                 int cumulativeScaleIndex);
EMBER_BEAGLE_EXPORT int beagleRemoveScaleFactorsByPartition(
    int instance, const int *scaleIndices, int count,
    int cumulativeScaleIndex, int partitionIndex);
EMBER_BEAGLE_EXPORT int beagleResetScaleFactors(int instance,
                                                int cumulativeScaleIndex);
EMBER_BEAGLE_EXPORT int beagleResetScaleFactorsByPartition(
    int instance, int cumulativeScaleIndex, int partitionIndex);
EMBER_BEAGLE_EXPORT int beagleCopyScaleFactors(int instance,
                                               int destScalingIndex,
                                               int srcScalingIndex);
EMBER_BEAGLE_EXPORT int beagleGetScaleFactors(int instance,
                                              int srcScalingIndex,
                                              double *outScaleFactors);

/* Log-likelihoods */
EMBER_BEAGLE_EXPORT int beagleCalculateRootLogLikelihoods(
    int instance, const int *bufferIndices,
    const int *categoryWeightsIndices, const int *stateFrequenciesIndices,
    const int *cumulativeScaleIndices, int count,
    double *outSumLogLikelihood);
EMBER_BEAGLE_EXPORT int beagleCalculateRootLogLikelihoodsByPartition(
    int instance, const int *bufferIndices,
    const int *categoryWeightsIndices, const int *stateFrequenciesIndices,
    const int *cumulativeScaleIndices, const int *partitionIndices,
    int partitionCount, int count, double *outSumLogLikelihoodByPartition,
    double *outSumLogLikelihood);
EMBER_BEAGLE_EXPORT int beagleCalculateEdgeLogLikelihoods(
    int instance, const int *parentBufferIndices,
    const int *childBufferIndices, const int *probabilityIndices,
    const int *firstDerivativeIndices, const int *secondDerivativeIndices,
    const int *categoryWeightsIndices, const int *stateFrequenciesIndices,
    const int *cumulativeScaleIndices, int count,
    double *outSumLogLikelihood, double *outSumFirstDerivative,
    double *outSumSecondDerivative);
EMBER_BEAGLE_EXPORT int beagleCalculateEdgeLogLikelihoodsByPartition(
    int instance, const int *parentBufferIndices,
    const int *childBufferIndices, const int *probabilityIndices,
    const int *firstDerivativeIndices, const int *secondDerivativeIndices,
    const int *categoryWeightsIndices, const int *stateFrequenciesIndices,
    const int *cumulativeScaleIndices, const int *partitionIndices,
    int partitionCount, int count, double *outSumLogLikelihoodByPartition,
    double *outSumLogLikelihood, double *outSumFirstDerivativeByPartition,
    double *outSumFirstDerivative, double *outSumSecondDerivativeByPartition,
    double *outSumSecondDerivative);
EMBER_BEAGLE_EXPORT int beagleGetLogLikelihood(int instance,
                                               double *outSumLogLikelihood);
EMBER_BEAGLE_EXPORT int beagleGetDerivatives(int instance,
                                             double *outSumFirstDerivative,
                                             double *outSumSecondDerivative);
EMBER_BEAGLE_EXPORT int beagleGetSiteLogLikelihoods(int instance,
                                                    double *outLogLikelihoods);
EMBER_BEAGLE_EXPORT int beagleGetSiteDerivatives(int instance,
                                                 double *outFirstDerivatives,
                                                 double *outSecondDerivatives);

#ifdef __cplusplus
}
#endif

#endif
